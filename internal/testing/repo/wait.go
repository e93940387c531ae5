package repo

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// WaitHTTP waits until url answers 200 OK, for at most within: the readiness of a server a
// harness started from ./bin. It gives up at once when exited is closed (the process
// ended; *waitErr is then its exit status), polling every poll.
func WaitHTTP(hc *http.Client, url string, within, poll time.Duration, exited <-chan struct{}, waitErr *error) error {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("failed to build a request for %s: %w", url, err)
		}
		if resp, err := hc.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("exited: %w", *waitErr)
		case <-ctx.Done():
			return errors.New("no answer on " + url + " within " + within.String())
		case <-time.After(poll):
		}
	}
}
