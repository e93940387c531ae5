//go:build tools

// Package tools pins promtool, which checks the shipped PrometheusRule's rules in tests.
package tools

import _ "github.com/prometheus/prometheus/cmd/promtool"
