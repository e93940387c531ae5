package bench

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// nsSecrets holds the secrets scenario's Secrets, which no Stack references.
	nsSecrets = "bench-secrets"
	// secretBytes is the size of each of them.
	secretBytes = 10 << 10
	// secretsSettle is how long the manager is left alone before its RSS is read, with and
	// without the Secrets: long enough for its informers to have seen them all and for a
	// garbage collection or two.
	secretsSettle = time.Minute
)

// runSecrets measures what unrelated Secrets in a watched namespace cost the manager:
// its RSS at rest, then again once SecretsN Secrets of 10 KiB exist that no Stack
// references. A manager that cached Secrets would hold them all (100 MiB for 10,000).
func (b *bench) runSecrets(ctx context.Context) error {
	n := b.cfg.SecretsN
	b.say("secrets: %s at rest before creating %d Secrets", secs(secretsSettle), n)
	if err := waitReporting(ctx, secretsSettle, b.sayRSS); err != nil {
		return err
	}
	before := b.rss()
	peak := b.sampleRSS(ctx)

	start := time.Now()
	var (
		next, failed atomic.Int64
		firstErr     error
		mu           sync.Mutex
		wg           sync.WaitGroup
	)
	for range 16 {
		wg.Go(func() {
			data := make([]byte, secretBytes)
			for i := next.Add(1); i <= int64(n) && ctx.Err() == nil; i = next.Add(1) {
				_, _ = rand.Read(data)
				sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: nsSecrets, Name: fmt.Sprintf("unrelated-%05d", i)}, Data: map[string][]byte{"blob": data}}
				if err := b.cluster.client.Create(ctx, sec); err != nil {
					failed.Add(1)
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if f := failed.Load(); f > 0 {
		return fmt.Errorf("failed to create %d of %d Secrets: %w", f, n, firstErr)
	}
	created := time.Since(start)
	b.say("secrets: %d created in %s; %s at rest", n, secs(created), secs(secretsSettle))
	if err := waitReporting(ctx, secretsSettle, b.sayRSS); err != nil {
		return err
	}
	after := b.rss()
	top := peak()

	ratio := 0.0
	if before > 0 {
		ratio = float64(after) / float64(before)
	}
	b.rep.add("Unrelated Secrets", fmt.Sprintf("%d Secrets of %d KiB of random data (%s in all) in the watched namespace %s, which no Stack references, "+
		"created %d at a time. The manager's RSS is read after %s at rest, before and after. Goal: with them < 1.2× without.\n\n",
		n, secretBytes>>10, MiB(int64(n)*secretBytes), nsSecrets, 16, secs(secretsSettle))+
		table([]string{"", ""}, [][]string{
			{"manager RSS without them", MiB(before)},
			{"manager RSS with them", MiB(after)},
			{"ratio", fmt.Sprintf("%.2f×", ratio)},
			{"manager peak RSS while they were created (sampled 1/s)", MiB(max(top, after))},
			{"creating them took", secs(created)},
		}))
	return nil
}
