//go:build e2e

package caposim

const e2eTag = true
