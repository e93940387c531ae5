package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/stackwright/stackwright/internal/scheme"
)

// Results of forwarding an event, the values of stackwright_flux_events_total's result
// label.
const (
	// ResultDelivered: notification-controller accepted the event.
	ResultDelivered = "delivered"
	// ResultDuplicate: notification-controller's rate limiter discarded it as a duplicate
	// of one it had just received, which is delivery as far as the sender is concerned.
	ResultDuplicate = "duplicate"
	// ResultFailed: refused (4xx) or unreachable after every attempt.
	ResultFailed = "failed"
	// ResultDropped: never sent, because the queue was full or the manager stopped first.
	ResultDropped = "dropped"
)

const (
	// queueSize bounds the events waiting to be sent; beyond it a burst costs events, not
	// memory or reconciles.
	queueSize = 1024
	// postTimeout bounds one POST; notification-controller answers once it has matched
	// the event against its Alerts (the Providers are called afterwards), within 15
	// seconds of its own.
	postTimeout = 15 * time.Second
	// attempts and firstBackoff ride out a restart of notification-controller (1+2+4 s).
	attempts     = 4
	firstBackoff = time.Second
	// flushTimeout bounds the delivery of what is queued when the manager stops.
	flushTimeout = 5 * time.Second
	// maxAnswer is how much of an answer is read so that the connection can be reused.
	maxAnswer = 64 << 10
)

var forwarded = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "stackwright_flux_events_total",
	Help: "Events forwarded to Flux's notification-controller, by result: delivered, duplicate (discarded by its rate limiter), failed (refused, or unreachable after retries), dropped (queue full, or not sent before shutdown).",
}, []string{"result"})

func init() {
	crmetrics.Registry.MustRegister(forwarded)
	// Every series at 0 from the start, so that a rate over failures is 0 rather than absent.
	for _, r := range []string{ResultDelivered, ResultDuplicate, ResultFailed, ResultDropped} {
		forwarded.WithLabelValues(r)
	}
}

// Forwarder sends events to notification-controller's event receiver. It is a
// manager.Runnable: Recorder queues events and Start sends them.
type Forwarder struct {
	address    string
	controller string
	instance   string
	scheme     *runtime.Scheme
	client     *http.Client
	queue      chan Event
	// log is for Recorder's Eventf, which has no context to take a logger from.
	log logr.Logger

	// Tests shorten these.
	firstBackoff time.Duration
	flushTimeout time.Duration
}

var (
	_ manager.Runnable               = (*Forwarder)(nil)
	_ manager.LeaderElectionRunnable = (*Forwarder)(nil)
)

// NewForwarder returns a Forwarder posting to address, the URL of notification-controller's
// event receiver (http://notification-controller.flux-system.svc.cluster.local./), as
// controller (the events' reportingController) from instance (their reportingInstance,
// the Pod's name).
func NewForwarder(address, controller, instance string) (*Forwarder, error) {
	if err := checkAddress(address); err != nil {
		return nil, fmt.Errorf("failed to parse notification-controller address: %w", err)
	}
	if controller == "" {
		return nil, errors.New("failed to create event forwarder: no reporting controller")
	}
	s, err := scheme.New()
	if err != nil {
		return nil, err
	}
	return &Forwarder{
		address: address, controller: controller, instance: instance, scheme: s,
		client:       &http.Client{Timeout: postTimeout},
		queue:        make(chan Event, queueSize),
		log:          ctrl.Log.WithName("flux-events"),
		firstBackoff: firstBackoff, flushTimeout: flushTimeout,
	}, nil
}

func checkAddress(address string) error {
	u, err := url.Parse(address)
	if err != nil {
		return err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("scheme %q is not http or https", u.Scheme)
	}
	if u.Hostname() == "" {
		return errors.New("no host")
	}
	return nil
}

// NeedLeaderElection is false: every replica's controllers record events (a follower's
// are few), and each replica sends its own.
func (f *Forwarder) NeedLeaderElection() bool { return false }

// Start sends queued events until ctx is done, then what is still queued for at most
// flushTimeout more, so that the events recorded while the manager stops are not lost.
func (f *Forwarder) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("flux-events")
	// Sending outlives ctx by flushTimeout: an event in flight when the manager stops is
	// not cut off, and nothing is sent after the deadline.
	sendCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	context.AfterFunc(ctx, func() {
		t := time.NewTimer(f.flushTimeout)
		defer t.Stop()
		select {
		case <-t.C:
			cancel()
		case <-sendCtx.Done():
		}
	})
	for {
		select {
		case ev := <-f.queue:
			f.deliver(sendCtx, log, &ev)
		case <-ctx.Done():
			f.flush(sendCtx, log)
			return nil
		}
	}
}

// flush sends what is queued until the queue is empty; once ctx is done, deliver drops.
func (f *Forwarder) flush(ctx context.Context, log logr.Logger) {
	dropped := 0
	for {
		select {
		case ev := <-f.queue:
			if f.deliver(ctx, log, &ev) == ResultDropped {
				dropped++
			}
		default:
			if dropped > 0 {
				log.Info("Dropped events not sent to notification-controller before shutdown", "count", dropped)
			}
			return
		}
	}
}

func (f *Forwarder) deliver(ctx context.Context, log logr.Logger, ev *Event) string {
	if ctx.Err() != nil {
		forwarded.WithLabelValues(ResultDropped).Inc()
		return ResultDropped
	}
	log = log.WithValues("kind", ev.InvolvedObject.Kind, "namespace", ev.InvolvedObject.Namespace,
		"name", ev.InvolvedObject.Name, "reason", ev.Reason)
	result, err := f.send(ctx, ev)
	forwarded.WithLabelValues(result).Inc()
	switch result {
	case ResultFailed:
		log.Info("Failed to forward event to notification-controller", "error", err.Error())
	case ResultDuplicate:
		log.V(1).Info("Forwarded event, discarded by notification-controller as a duplicate")
	default:
		log.V(1).Info("Forwarded event to notification-controller")
	}
	return result
}

// send posts ev, again after connection errors and 5xx answers, and says how it went.
func (f *Forwarder) send(ctx context.Context, ev *Event) (string, error) {
	body, err := json.Marshal(ev)
	if err != nil {
		return ResultFailed, fmt.Errorf("failed to encode event: %w", err)
	}
	wait := f.firstBackoff
	for attempt := 1; ; attempt++ {
		status, err := f.post(ctx, body)
		switch {
		case err != nil:
		case status == http.StatusTooManyRequests:
			return ResultDuplicate, nil
		case status >= 200 && status < 300:
			return ResultDelivered, nil
		case status < 500:
			// The same event would be refused again.
			return ResultFailed, fmt.Errorf("notification-controller refused the event: %d %s", status, http.StatusText(status))
		default:
			err = fmt.Errorf("notification-controller answered %d %s", status, http.StatusText(status))
		}
		if attempt == attempts {
			return ResultFailed, fmt.Errorf("failed to post event, %d attempts: %w", attempt, err)
		}
		select {
		case <-ctx.Done():
			return ResultFailed, fmt.Errorf("failed to post event before shutdown: %w", err)
		case <-time.After(wait):
		}
		wait *= 2
	}
}

func (f *Forwarder) post(ctx context.Context, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.address, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("failed to create request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := f.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswer))
	return resp.StatusCode, nil
}
