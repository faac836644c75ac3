package ha

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Pointer locates a job's latest completed checkpoint (or savepoint) in the
// checkpoint storage. It is stored as JSON; see the package doc.
type Pointer struct {
	// ID is the checkpoint id, at least 1.
	ID int64 `json:"id"`
	// Path is the checkpoint's directory or URL in the checkpoint storage.
	Path string `json:"path"`
	// Savepoint is true for a savepoint.
	Savepoint bool `json:"savepoint,omitempty"`
	// Time is when the checkpoint completed.
	Time time.Time `json:"time"`
}

// JobStatus is a globally terminal status of a job: a new leader does not
// resume a job that has one.
type JobStatus string

// The terminal statuses, named as in Flink.
const (
	StatusFinished JobStatus = "FINISHED"
	StatusCanceled JobStatus = "CANCELED"
	StatusFailed   JobStatus = "FAILED"
)

func (s JobStatus) valid() bool {
	return s == StatusFinished || s == StatusCanceled || s == StatusFailed
}

// errConflict says the leader comparison held but another comparison of a
// transaction did not.
var errConflict = errors.New("conflict")

// txn runs one transaction that applies then only while l leads and cmps
// hold. It returns ErrNotLeader when the leadership has ended and
// errConflict when only cmps failed.
func (l *Leadership) txn(ctx context.Context, what string, cmps []clientv3.Cmp, then ...clientv3.Op) (*clientv3.TxnResponse, error) {
	select {
	case <-l.lost:
		return nil, fmt.Errorf("ha: %s: %w (leadership of cluster %s, epoch %d, has ended)", what, ErrNotLeader, l.e.cfg.ClusterID, l.rev)
	default:
	}
	all := append([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(l.key), "=", l.rev)}, cmps...)
	resp, err := l.e.client.Txn(ctx).If(all...).Then(then...).Else(clientv3.OpGet(l.key, clientv3.WithKeysOnly())).Commit()
	if err != nil {
		return nil, fmt.Errorf("ha: %s: %w", what, err)
	}
	if resp.Succeeded {
		return resp, nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 || kvs[0].CreateRevision != l.rev {
		l.markLost("fenced: a transaction found the leader key gone or replaced")
		return nil, fmt.Errorf("ha: %s: %w (etcd no longer holds the leader key of epoch %d)", what, ErrNotLeader, l.rev)
	}
	return nil, errConflict
}

// get reads one key, fenced.
func (l *Leadership) get(ctx context.Context, what, key string) (value []byte, modRev int64, ok bool, err error) {
	resp, err := l.txn(ctx, what, nil, clientv3.OpGet(key))
	if err != nil {
		return nil, 0, false, err
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return nil, 0, false, nil
	}
	return kvs[0].Value, kvs[0].ModRevision, true, nil
}

// PutJob stores the spec of a job (its graph and settings, opaque here),
// replacing any earlier spec. It fails with ErrJobTerminal if the job has a
// terminal status: a finished job id is not reused.
func (l *Leadership) PutJob(ctx context.Context, job string, spec []byte) error {
	if err := checkJobID(job); err != nil {
		return err
	}
	what := "put job " + job
	_, err := l.txn(ctx, what,
		[]clientv3.Cmp{clientv3.Compare(clientv3.Version(l.e.keys.job(job, leafStatus)), "=", 0)},
		clientv3.OpPut(l.e.keys.job(job, leafSpec), string(spec)))
	if errors.Is(err, errConflict) {
		status, _, serr := l.JobStatus(ctx, job)
		if serr != nil {
			return serr
		}
		return fmt.Errorf("ha: %s: %w (%s)", what, ErrJobTerminal, status)
	}
	return err
}

// Job returns the spec stored by PutJob, and false if there is none.
func (l *Leadership) Job(ctx context.Context, job string) ([]byte, bool, error) {
	if err := checkJobID(job); err != nil {
		return nil, false, err
	}
	spec, _, ok, err := l.get(ctx, "read job "+job, l.e.keys.job(job, leafSpec))
	return spec, ok, err
}

// Jobs returns the ids of the jobs that have a spec, sorted: the jobs a new
// leader resumes or, if they have a terminal status, cleans up.
func (l *Leadership) Jobs(ctx context.Context) ([]string, error) {
	resp, err := l.txn(ctx, "list jobs", nil, clientv3.OpGet(l.e.keys.jobs(), clientv3.WithPrefix(), clientv3.WithKeysOnly()))
	if err != nil {
		return nil, err
	}
	var jobs []string
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		if id, ok := l.e.keys.jobOfSpecKey(string(kv.Key)); ok {
			jobs = append(jobs, id)
		}
	}
	slices.Sort(jobs)
	return jobs, nil
}

// SetCheckpointCounter stores next, the id the job's next checkpoint will
// get. It fails with ErrCounterDecrease if next is below the stored value;
// storing the same value again succeeds.
func (l *Leadership) SetCheckpointCounter(ctx context.Context, job string, next int64) error {
	if err := checkJobID(job); err != nil {
		return err
	}
	if next < 0 {
		return fmt.Errorf("ha: set checkpoint counter of job %s to %d: must not be negative", job, next)
	}
	what := "set checkpoint counter of job " + job
	key := l.e.keys.job(job, leafCounter)
	for {
		cur, modRev, err := l.counter(ctx, what, key)
		if err != nil {
			return err
		}
		if next < cur {
			return fmt.Errorf("ha: %s to %d: %w (it is %d)", what, next, ErrCounterDecrease, cur)
		}
		if next == cur && modRev != 0 {
			return nil
		}
		_, err = l.txn(ctx, what, []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", modRev)},
			clientv3.OpPut(key, strconv.FormatInt(next, 10)))
		if !errors.Is(err, errConflict) {
			return err
		}
		// Another call of this leadership changed the counter between
		// the read and the write: read it again.
	}
}

// CheckpointCounter returns the value stored by SetCheckpointCounter, or 0
// if there is none.
func (l *Leadership) CheckpointCounter(ctx context.Context, job string) (int64, error) {
	if err := checkJobID(job); err != nil {
		return 0, err
	}
	n, _, err := l.counter(ctx, "read checkpoint counter of job "+job, l.e.keys.job(job, leafCounter))
	return n, err
}

func (l *Leadership) counter(ctx context.Context, what, key string) (n, modRev int64, err error) {
	v, modRev, ok, err := l.get(ctx, what, key)
	if err != nil || !ok {
		return 0, 0, err
	}
	n, err = strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("ha: %s: value %q at %s is not a decimal integer: %v", what, v, key, err)
	}
	return n, modRev, nil
}

// SetLatestCheckpoint stores the pointer to the job's latest completed
// checkpoint, replacing the previous one.
func (l *Leadership) SetLatestCheckpoint(ctx context.Context, job string, p Pointer) error {
	if err := checkJobID(job); err != nil {
		return err
	}
	what := "set latest checkpoint of job " + job
	if p.ID < 1 || p.Path == "" {
		return fmt.Errorf("ha: %s: pointer %+v: want an ID of at least 1 and a non-empty Path", what, p)
	}
	data, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("ha: %s: %w", what, err)
	}
	_, err = l.txn(ctx, what, nil, clientv3.OpPut(l.e.keys.job(job, leafLatest), string(data)))
	return err
}

// LatestCheckpoint returns the pointer stored by SetLatestCheckpoint, and
// false if there is none.
func (l *Leadership) LatestCheckpoint(ctx context.Context, job string) (Pointer, bool, error) {
	if err := checkJobID(job); err != nil {
		return Pointer{}, false, err
	}
	what := "read latest checkpoint of job " + job
	key := l.e.keys.job(job, leafLatest)
	v, _, ok, err := l.get(ctx, what, key)
	if err != nil || !ok {
		return Pointer{}, false, err
	}
	var p Pointer
	if err := json.Unmarshal(v, &p); err != nil {
		return Pointer{}, false, fmt.Errorf("ha: %s: value at %s is not a pointer: %v", what, key, err)
	}
	return p, true, nil
}

// SetJobStatus stores the job's terminal status. Once stored it does not
// change: setting the same status again succeeds, another one fails with
// ErrJobTerminal.
func (l *Leadership) SetJobStatus(ctx context.Context, job string, status JobStatus) error {
	if err := checkJobID(job); err != nil {
		return err
	}
	what := "set status of job " + job
	if !status.valid() {
		return fmt.Errorf("ha: %s: status %q: want %s, %s or %s", what, status, StatusFinished, StatusCanceled, StatusFailed)
	}
	key := l.e.keys.job(job, leafStatus)
	_, err := l.txn(ctx, what, []clientv3.Cmp{clientv3.Compare(clientv3.Version(key), "=", 0)},
		clientv3.OpPut(key, string(status)))
	if !errors.Is(err, errConflict) {
		return err
	}
	cur, _, err := l.JobStatus(ctx, job)
	if err != nil {
		return err
	}
	if cur != status {
		return fmt.Errorf("ha: %s to %s: %w (%s)", what, status, ErrJobTerminal, cur)
	}
	return nil
}

// JobStatus returns the status stored by SetJobStatus, and false if there
// is none.
func (l *Leadership) JobStatus(ctx context.Context, job string) (JobStatus, bool, error) {
	if err := checkJobID(job); err != nil {
		return "", false, err
	}
	v, _, ok, err := l.get(ctx, "read status of job "+job, l.e.keys.job(job, leafStatus))
	return JobStatus(v), ok, err
}

// RemoveJob deletes the job's spec, checkpoint counter and latest
// checkpoint pointer, keeping its terminal status. It fails with
// ErrJobNotTerminal if the job has no terminal status (SetJobStatus first).
// Removing a removed job succeeds.
func (l *Leadership) RemoveJob(ctx context.Context, job string) error {
	if err := checkJobID(job); err != nil {
		return err
	}
	what := "remove job " + job
	k := l.e.keys
	_, err := l.txn(ctx, what, []clientv3.Cmp{clientv3.Compare(clientv3.Version(k.job(job, leafStatus)), ">", 0)},
		clientv3.OpDelete(k.job(job, leafSpec)),
		clientv3.OpDelete(k.job(job, leafCounter)),
		clientv3.OpDelete(k.job(job, leafLatest)))
	if errors.Is(err, errConflict) {
		return fmt.Errorf("ha: %s: %w (set FINISHED, CANCELED or FAILED first)", what, ErrJobNotTerminal)
	}
	return err
}
