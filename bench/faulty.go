package bench

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/clip"
)

// The ways a faulty fleet's bad Stacks fail, in turn.
const (
	faultBadProgram    = "bad program (a resource type no provider has)"
	faultMissingSecret = "missing Secret (an envRefs entry names one that does not exist)"
	faultProvider      = "provider error (a resource whose every create fails)"
	faultTimeout       = "timeout (a resource that takes an hour; the run is cancelled at --runner-deadline)"
)

var faults = []string{faultBadProgram, faultMissingSecret, faultProvider, faultTimeout}

// faultOf returns the fault of the i-th Stack of a faulty fleet, "" for a good one: every
// tenth fails, the four ways in turn.
func faultOf(i int) string {
	if i%10 != 9 {
		return ""
	}
	return faults[(i/10)%len(faults)]
}

// faultyObjects are the Program and Stack of the i-th Stack of a faulty fleet.
func faultyObjects(ns, name, files string, fault string) (*pulumiv1.Program, *pulumiv1.Stack) {
	p, st := benchProgram(ns, name), benchStack(ns, name, name, files)
	res := func(typ string, props map[string]any) pulumiv1.Resource {
		r := pulumiv1.Resource{Type: typ, Properties: map[string]apiextensionsv1.JSON{}}
		for k, v := range props {
			r.Properties[k] = *jsonOf(v)
		}
		return r
	}
	switch fault {
	case faultBadProgram:
		p.Program.Resources["broken"] = res("stackwright-testing:index:NoSuchResource", nil)
	case faultMissingSecret:
		st.Spec.EnvRefs["API_TOKEN"] = pulumiv1.ResourceRef{
			Type:             pulumiv1.ResourceSelectorSecret,
			ResourceSelector: pulumiv1.ResourceSelector{Secret: &pulumiv1.SecretSelector{Name: "missing-" + name, Key: "token"}},
		}
	case faultProvider:
		p.Program.Resources["flaky"] = res("stackwright-testing:index:Flaky", map[string]any{"failures": 1 << 30, "counterFile": "flaky.count"})
	case faultTimeout:
		p.Program.Resources["nap"] = res("stackwright-testing:index:Sleep", map[string]any{"seconds": 3600})
	}
	return p, st
}

// runFaulty creates a fleet of N Stacks of which a tenth fail (faultOf) and measures how
// long the good nine tenths take to be Ready, against the all-good fleet of the fleet
// scenario; then reads what each bad Stack says.
func (b *bench) runFaulty(ctx context.Context) error {
	if b.fleetWall == 0 {
		return fmt.Errorf("faulty needs the fleet scenario's all-good time: run fleet first and let it finish")
	}
	n := b.cfg.N
	names := numbered("faulty", n)
	fault := map[string]string{}
	var good, bad []string
	for i, name := range names {
		if fault[name] = faultOf(i); fault[name] == "" {
			good = append(good, name)
		} else {
			bad = append(bad, name)
		}
	}
	timeout := max(4*b.fleetWall, 5*time.Minute)
	b.say("faulty: creating %d Programs and Stacks, %d of them bad (timeout %s)", n, len(bad), timeout.Round(time.Second))
	start, _, err := b.createFleet(ctx, keysOf(nsFaulty, names), func(ns, name string) error {
		p, st := faultyObjects(ns, name, filepath.Join(b.work, "files", ns, name), fault[name])
		if err := b.cluster.client.Create(ctx, p); err != nil {
			return err
		}
		return b.cluster.client.Create(ctx, st)
	})
	if err != nil {
		return err
	}
	r := b.waitReady(ctx, keysOf(nsFaulty, good), "", start, timeout, func(ready int) {
		b.say("faulty: %d/%d good Stacks Ready after %s; Updates: %s", ready, len(good), secs(time.Since(start)), mapString(b.track.phases(nsFaulty)))
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	rows := [][]string{
		{"Stacks", fmt.Sprintf("%d: %d good, %d bad", n, len(good), len(bad))},
		{"start → every good Stack Ready", r.allReady()},
		{"the all-good fleet of the same N (fleet scenario): start → all Ready", secs(b.fleetWall)},
		{"good Stacks' time / all-good fleet's time", ratio(Ratio(r.wall, b.fleetWall))},
	}
	said, err := b.badStacksSay(ctx, bad, fault)
	if err != nil {
		return err
	}
	body := fmt.Sprintf("N Stacks created at once, as in the fleet scenario, but every tenth is bad, four ways in turn; "+
		"times are since the first create. `--max-concurrent-updates %d`; the manager's `--runner-deadline` is the bench's (%s).\n\n",
		b.cfg.Parallelism, b.cfg.RunnerDeadline) + table([]string{"faulty fleet", ""}, rows) + "\n" + said
	b.rep.add(fmt.Sprintf("Faulty fleet (N=%d, 10%% bad)", n), body)
	return nil
}

// badStacksSay tabulates, per fault, the Ready condition the bad Stacks show once the good
// ones are Ready: its status and reason, how many say so, and one message.
func (b *bench) badStacksSay(ctx context.Context, bad []string, fault map[string]string) (string, error) {
	type seen struct {
		count   int
		example string
	}
	byFault := map[string]map[string]*seen{}
	silent := 0
	for _, name := range bad {
		st := &pulumiv1.Stack{}
		if err := b.cluster.client.Get(ctx, client.ObjectKey{Namespace: nsFaulty, Name: name}, st); err != nil {
			return "", err
		}
		c := apimeta.FindStatusCondition(st.Status.Conditions, pulumiv1.ConditionReady)
		key, msg := "no Ready condition", ""
		if c != nil {
			key, msg = fmt.Sprintf("Ready=%s %s", c.Status, c.Reason), c.Message
			if stalled := apimeta.FindStatusCondition(st.Status.Conditions, pulumiv1.ConditionStalled); stalled != nil && stalled.Status == "True" {
				key += ", Stalled " + stalled.Reason
			}
		}
		if msg == "" {
			silent++
		}
		f := fault[name]
		if byFault[f] == nil {
			byFault[f] = map[string]*seen{}
		}
		s := byFault[f][key]
		if s == nil {
			s = &seen{example: msg}
			byFault[f][key] = s
		}
		s.count++
	}
	var rows [][]string
	for _, f := range faults {
		for _, key := range slices.Sorted(maps.Keys(byFault[f])) {
			s := byFault[f][key]
			rows = append(rows, []string{f, key, fmt.Sprint(s.count), clip.Line(strings.ReplaceAll(s.example, "|", "/"), 220)})
		}
	}
	out := table([]string{"fault", "what the Stack says", "Stacks", "message (one of them)"}, rows)
	return out + fmt.Sprintf("\nBad Stacks with no message: %d of %d.\n", silent, len(bad)), nil
}
