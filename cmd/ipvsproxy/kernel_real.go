//go:build !fakekernel

package main

// fakeKernel is false in every build that programs a node: only a build with
// -tags fakekernel (kernel_fake.go) runs on the adapters' Fakes.
const fakeKernel = false
