// Package sysctl reads and writes kernel parameters under /proc/sys. It
// changes only the names it is given. Fake keeps values in memory.
package sysctl
