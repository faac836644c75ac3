package ha

import (
	"fmt"
	"strings"
)

// Leaf names of a job's keys; see the package doc for the layout.
const (
	leafSpec    = "spec"
	leafCounter = "checkpoint-counter"
	leafLatest  = "latest-checkpoint"
	leafStatus  = "status"
)

// keyspace builds the etcd keys of one cluster.
type keyspace struct {
	root string // "/weir/<cluster-id>"
}

func newKeyspace(clusterID string) keyspace {
	return keyspace{root: "/weir/" + strings.TrimPrefix(clusterID, "/")}
}

// election is the prefix concurrency.Election is given: candidates are
// election()+"/<lease-id-hex>".
func (k keyspace) election() string { return k.root + "/leader" }

// jobs is the prefix of every job key.
func (k keyspace) jobs() string { return k.root + "/jobs/" }

func (k keyspace) job(id, leaf string) string { return k.jobs() + id + "/" + leaf }

// jobOfSpecKey returns the job id of a spec key, or false for other keys.
func (k keyspace) jobOfSpecKey(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, k.jobs())
	if !ok {
		return "", false
	}
	id, ok := strings.CutSuffix(rest, "/"+leafSpec)
	if !ok || strings.Contains(id, "/") {
		return "", false
	}
	return id, true
}

func checkJobID(job string) error {
	if err := checkSegment(job); err != nil {
		return fmt.Errorf("ha: job id %q: %v", job, err)
	}
	return nil
}
