package cluster

import "hash/fnv"

// Owner returns the instance of live that should step workflow wf:
// rendezvous (highest-random-weight) hashing, the instance with the highest
// score(instance, wf). Every instance computes the same answer from the
// same list, whatever its order; when an instance joins or leaves, only the
// workflows it wins or held move (about 1/n of them). "" when live is empty.
func Owner(wf string, live []string) string {
	best, bestScore := "", uint64(0)
	for _, id := range live {
		s := score(id, wf)
		if best == "" || s > bestScore || (s == bestScore && id < best) {
			best, bestScore = id, s
		}
	}
	return best
}

// score is a 64-bit hash of (instance, workflow): FNV-1a over both, with a
// NUL between them (neither holds one), then the splitmix64 finalizer so
// that ids differing in their last bytes do not get correlated scores.
// It must never change: instances of different versions must agree.
func score(instance, wf string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(instance))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(wf))
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
