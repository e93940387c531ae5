package budget

import (
	"bytes"
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
	data, c2, err := ReadAll(New(0), strings.NewReader("hello"), 10, errors.New("too large"))
	if err != nil || string(data) != "hello" {
		t.Fatalf("ReadAll without a limit = %q, %v", data, err)
	}
	c2.Release()
}

func TestReadAll_Limits(t *testing.T) {
	tooLarge := errors.New("too large")
	tests := []struct {
		name    string
		limit   int64
		body    string
		max     int64
		wantErr error
	}{
		{name: "Fits", limit: 100, body: "0123456789", max: 20},
		{name: "OverItsCap", limit: 100, body: "0123456789", max: 5, wantErr: tooLarge},
		{name: "OverTheBudget", limit: 4, body: strings.Repeat("x", 5000), max: 10000, wantErr: ErrSpent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := New(tt.limit)
			data, c, err := ReadAll(b, strings.NewReader(tt.body), tt.max, tooLarge)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("ReadAll() = %v; want %v", err, tt.wantErr)
			}
			if err != nil {
				if b.InUse() != 0 {
					t.Errorf("a failed ReadAll left %d bytes charged", b.InUse())
				}
				return
			}
			if !bytes.Equal(data, []byte(tt.body)) || b.InUse() != int64(len(tt.body)) {
				t.Errorf("data %q, in use %d", data, b.InUse())
			}
			c.Release()
			if b.InUse() != 0 {
				t.Errorf("in use after Release = %d", b.InUse())
			}
		})
	}
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
