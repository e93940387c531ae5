package budget

import (
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
)

func TestCharge_Take_RefusedPastTheLimitAndGivenBackOnRelease(t *testing.T) {
	b := New(100)
	first, second := b.Charge(), b.Charge()
	if err := first.Take(60); err != nil {
		t.Fatalf("Take(60) = %v", err)
	}
	err := second.Take(41)
	if !errors.Is(err, ErrSpent) || !strings.Contains(err.Error(), "--"+Flag) {
		t.Fatalf("Take(41) over the limit = %v; want ErrSpent naming the flag", err)
	}
	if got := second.Held(); got != 0 {
		t.Errorf("a refused Take held %d bytes", got)
	}
	if err := second.Take(40); err != nil {
		t.Fatalf("Take(40) within the limit = %v", err)
	}
	first.Release()
	first.Release()
	if got := b.InUse(); got != 40 {
		t.Errorf("in use after releasing 60 (twice) = %d; want 40", got)
	}
	if err := first.Take(1); err == nil {
		t.Error("a released charge took more")
	}
	second.Release()
	if got, refused := b.InUse(), b.Refused(); got != 0 || refused != 1 {
		t.Errorf("in use %d, refused %d; want 0 and 1", got, refused)
	}
}

func TestBudget_Nil_NoLimit(t *testing.T) {
	var b *Budget
	c := b.Charge()
	if err := c.Take(1 << 40); err != nil {
		t.Fatalf("nil budget refused: %v", err)
	}
	c.Release()
}

// Many readers at once never hold more than the budget, whatever the interleaving, and
// give all of it back.
func TestReader_Concurrent_NeverPastTheLimit(t *testing.T) {
	const limit = 1 << 16
	b := New(limit)
	stop := make(chan struct{})
	var peak int64
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			default:
				peak = max(peak, b.InUse())
			}
		}
	}()
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			c := b.Charge()
			defer c.Release()
			_, _ = io.Copy(io.Discard, c.Reader(io.LimitReader(zeros{}, 8<<10)))
		})
	}
	wg.Wait()
	close(stop)
	<-sampled
	if peak > limit || b.InUse() != 0 {
		t.Errorf("peak %d over the limit %d, or %d left in use", peak, limit, b.InUse())
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }
