//go:build tools

// Package kyverno pins the Kyverno admission controller for bench/peers.sh.
package kyverno

import _ "github.com/kyverno/kyverno/cmd/kyverno"
