// Package ledger owns the bookkeeping of the conformance run in shards: the names of the specs
// the run selects (read from a ginkgo JUnit report, a dry run's or a real one's), the split of
// that sorted list into N deterministic shards and the ginkgo focus that selects exactly one,
// and the ledger file that each run appends its results to and `conformanceledger status` reads.
//
// The ledger is append-only: a failure is never replaced by a later pass, both lines stay, and
// a failure counts as explained only once a later "cause" line names it. The package never runs
// a test nor touches the cluster; it reads reports and reads and appends one file.
package ledger
