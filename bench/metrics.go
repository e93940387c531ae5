package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Sample is one line of the Prometheus text exposition format.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Metrics is one scrape of a metrics endpoint.
type Metrics []Sample

// ParseMetrics parses the Prometheus text format (version 0.0.4): comments and blank lines
// are skipped; timestamps after the value are ignored.
func ParseMetrics(r io.Reader) (Metrics, error) {
	var out Metrics
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' {
			continue
		}
		s, err := parseSample(text)
		if err != nil {
			return nil, fmt.Errorf("metrics line %d: %w", line, err)
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

func parseSample(text string) (Sample, error) {
	s := Sample{Labels: map[string]string{}}
	i := strings.IndexAny(text, "{ \t")
	if i <= 0 {
		return s, fmt.Errorf("no value in %q", text)
	}
	s.Name, text = text[:i], text[i:]
	if text[0] == '{' {
		rest, err := parseLabels(text[1:], s.Labels)
		if err != nil {
			return s, err
		}
		text = rest
	}
	f := strings.Fields(text)
	if len(f) == 0 || len(f) > 2 {
		return s, fmt.Errorf("want a value (and a timestamp) after %s, got %q", s.Name, text)
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return s, fmt.Errorf("bad value of %s: %w", s.Name, err)
	}
	s.Value = v
	return s, nil
}

// parseLabels reads `name="value",...}` into labels and returns what follows the '}'.
func parseLabels(text string, labels map[string]string) (string, error) {
	for {
		text = strings.TrimLeft(text, " \t,")
		if text == "" {
			return "", errors.New("unterminated label set")
		}
		if text[0] == '}' {
			return text[1:], nil
		}
		eq := strings.IndexByte(text, '=')
		if eq <= 0 || eq+1 >= len(text) || text[eq+1] != '"' {
			return "", fmt.Errorf("bad label in %q", text)
		}
		name := strings.TrimSpace(text[:eq])
		var val strings.Builder
		j := eq + 2
		for ; j < len(text) && text[j] != '"'; j++ {
			c := text[j]
			if c == '\\' && j+1 < len(text) {
				j++
				switch text[j] {
				case 'n':
					c = '\n'
				default:
					c = text[j] // \\ and \"
				}
			}
			val.WriteByte(c)
		}
		if j >= len(text) {
			return "", fmt.Errorf("unterminated value of label %s", name)
		}
		labels[name] = val.String()
		text = text[j+1:]
	}
}

// Sum adds up every sample of the metric name whose labels include match.
func (m Metrics) Sum(name string, match map[string]string) float64 {
	var total float64
	for _, s := range m {
		if s.Name == name && hasLabels(s.Labels, match) {
			total += s.Value
		}
	}
	return total
}

// By adds up the samples of name per value of label.
func (m Metrics) By(name, label string) map[string]float64 {
	out := map[string]float64{}
	for _, s := range m {
		if s.Name == name {
			out[s.Labels[label]] += s.Value
		}
	}
	return out
}

func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// DeltaBy returns after.By(name, label) - before.By(name, label), for counters.
func DeltaBy(before, after Metrics, name, label string) map[string]float64 {
	b, a := before.By(name, label), after.By(name, label)
	out := map[string]float64{}
	for k, v := range a {
		if d := v - b[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// Scrape fetches and parses the metrics at url.
func Scrape(ctx context.Context, url string) (Metrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("failed to scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("failed to scrape %s: %s", url, resp.Status)
	}
	return ParseMetrics(resp.Body)
}
