//go:build e2e

package testutil

const e2eTag = true
