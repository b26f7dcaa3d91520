// bench-go-driver: the benchmark's independent load generator, a plain grpc-go client of the
// RateLimitService (go-control-plane's generated v3 stub, as a Go caller would write it). It speaks the
// same protocol as bench/load/loadgen.ts so the harness can run either: one argument, the LoadSpec JSON
// (plus "framesFile": the workload's requests, pre-encoded by the harness from the same seed, as
// <uint32 big-endian length><RateLimitRequest> records); prints MEASURE_START / MEASURE_END around the
// measured window and then one JSON line with the result. Closed loop: `connections` x `inFlight` calls
// in flight, each caller bound to one connection. Open loop: a fixed arrival rate, latency counted from
// each call's intended start, and ("sentLatency") from when the call was actually sent: the first includes
// this driver's own lateness in starting calls (its 1 ms sleep loop), the second leaves it out. Built on demand into the tools cache by bench/harness/drivers.ts.
package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	commonrl "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
)

type loadSpec struct {
	Target      string  `json:"target"`
	Workload    string  `json:"workload"`
	KeyBase     int64   `json:"keyBase"`
	Mode        string  `json:"mode"`
	Connections int     `json:"connections"`
	Concurrency int     `json:"concurrency"`
	InFlight    int     `json:"inFlight"`
	Rate        float64 `json:"rate"`
	WarmupMs    int     `json:"warmupMs"`
	DurationMs  int     `json:"durationMs"`
	MaxRequests int64   `json:"maxRequests"`
	FramesFile  string  `json:"framesFile"`
}

// histogram: the layout of bench/load/histogram.ts (1 µs buckets below 128 µs, 64 per power of two above).
const sub = 64
const nBuckets = 40 * sub

type histogram struct {
	counts [nBuckets]float64
	count  float64
	sum    float64
	max    float64
}

func indexOf(us float64) int {
	if us < 0 {
		us = 0
	}
	v := uint64(us)
	if v < 2*sub {
		return int(v)
	}
	e := bits.Len64(v) - 7
	i := e*sub + int(v>>uint(e))
	if i >= nBuckets {
		return nBuckets - 1
	}
	return i
}

func lowerOf(i int) float64 {
	if i < 2*sub {
		return float64(i)
	}
	e := i/sub - 1
	return float64(i-e*sub) * math.Pow(2, float64(e))
}

func (h *histogram) record(us float64) {
	h.counts[indexOf(us)]++
	h.count++
	h.sum += us
	if us > h.max {
		h.max = us
	}
}

func (h *histogram) quantile(q float64) float64 {
	if h.count == 0 {
		return 0
	}
	rank := math.Max(1, math.Ceil(q*h.count))
	seen := 0.0
	for i := 0; i < nBuckets; i++ {
		seen += h.counts[i]
		if seen >= rank {
			return math.Min(h.max, (lowerOf(i)+lowerOf(i+1))/2)
		}
	}
	return h.max
}

func r1(x float64) float64 { return math.Round(x*10) / 10 }

func (h *histogram) summary() map[string]float64 {
	mean := 0.0
	if h.count > 0 {
		mean = h.sum / h.count
	}
	return map[string]float64{
		"count": h.count, "meanUs": r1(mean), "p50Us": r1(h.quantile(0.5)), "p90Us": r1(h.quantile(0.9)),
		"p99Us": r1(h.quantile(0.99)), "p999Us": r1(h.quantile(0.999)), "maxUs": r1(h.max),
	}
}

// requests: the pre-encoded pool cycled, or (highcard) a new distinct key per call.
type requests struct {
	pool     []*rlsv3.RateLimitRequest
	highcard bool
	keyBase  int64
}

func (r *requests) get(i int64) *rlsv3.RateLimitRequest {
	if r.highcard {
		return &rlsv3.RateLimitRequest{
			Domain: "bench_highcard",
			Descriptors: []*commonrl.RateLimitDescriptor{{Entries: []*commonrl.RateLimitDescriptor_Entry{
				{Key: "ip", Value: "10." + strconv.FormatInt(r.keyBase+i, 10)},
			}}},
		}
	}
	return r.pool[i%int64(len(r.pool))]
}

func loadPool(path string) ([]*rlsv3.RateLimitRequest, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []*rlsv3.RateLimitRequest
	for len(b) >= 4 {
		n := int(binary.BigEndian.Uint32(b))
		if 4+n > len(b) {
			return nil, fmt.Errorf("truncated frames file %s", path)
		}
		m := &rlsv3.RateLimitRequest{}
		if err := proto.Unmarshal(b[4:4+n], m); err != nil {
			return nil, err
		}
		out = append(out, m)
		b = b[4+n:]
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no requests in %s", path)
	}
	return out, nil
}

func cpuMs() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e6
}

func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "bench-go-driver: "+format+"\n", a...)
	os.Exit(1)
}

func main() {
	if len(os.Args) != 2 {
		fail("usage: bench-go-driver '<LoadSpec JSON>'")
	}
	var spec loadSpec
	if err := json.Unmarshal([]byte(os.Args[1]), &spec); err != nil {
		fail("bad spec: %v", err)
	}
	reqs := &requests{highcard: spec.Workload == "highcard", keyBase: spec.KeyBase}
	if !reqs.highcard {
		pool, err := loadPool(spec.FramesFile)
		if err != nil {
			fail("%v", err)
		}
		reqs.pool = pool
	}
	if spec.Connections < 1 {
		spec.Connections = 1
	}
	clients := make([]rlsv3.RateLimitServiceClient, spec.Connections)
	for i := range clients {
		// One ClientConn per connection: grpc-go multiplexes every call of a ClientConn on one HTTP/2
		// connection, as Envoy's gRPC client does per cluster host.
		cc, err := grpc.NewClient(spec.Target, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			fail("dial %s: %v", spec.Target, err)
		}
		defer cc.Close()
		cc.Connect()
		clients[i] = rlsv3.NewRateLimitServiceClient(cc)
	}

	var (
		mu         sync.Mutex
		hist       histogram
		sentHist   histogram
		completed  int64
		errs       int64
		ok         int64
		over       int64
		firstError string
		measuring  atomic.Bool
		stopped    atomic.Bool
		seq        atomic.Int64
		inFlight   atomic.Int64
		wg         sync.WaitGroup
		backlogMax int64
	)
	done := make(chan struct{})
	var doneOnce sync.Once
	ctx := context.Background()

	call := func(c rlsv3.RateLimitServiceClient, start time.Time) {
		sent := time.Now()
		resp, err := c.ShouldRateLimit(ctx, reqs.get(seq.Add(1)-1))
		if !measuring.Load() {
			return
		}
		end := time.Now()
		mu.Lock()
		hist.record(float64(end.Sub(start).Nanoseconds()) / 1000)
		sentHist.record(float64(end.Sub(sent).Nanoseconds()) / 1000)
		completed++
		if err != nil {
			errs++
			if firstError == "" {
				firstError = err.Error()
			}
		} else if resp.OverallCode == rlsv3.RateLimitResponse_OK {
			ok++
		} else if resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT {
			over++
		}
		n := completed
		mu.Unlock()
		if spec.MaxRequests > 0 && n >= spec.MaxRequests {
			doneOnce.Do(func() { close(done) })
		}
	}

	if spec.Mode == "closed" {
		perConn := spec.InFlight
		if perConn < 1 {
			total := spec.Concurrency
			if total < 1 {
				total = 64
			}
			perConn = (total + spec.Connections - 1) / spec.Connections
		}
		for i := 0; i < spec.Connections*perConn; i++ {
			c := clients[i%spec.Connections]
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stopped.Load() {
					call(c, time.Now())
				}
			}()
		}
	} else {
		rate := spec.Rate
		if rate <= 0 {
			rate = 1000
		}
		const maxInFlightOpen = 10000
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			var started int64
			next := 0
			for !stopped.Load() {
				due := int64(time.Since(t0).Seconds() * rate)
				for started < due {
					if inFlight.Load() >= maxInFlightOpen {
						if due-started > backlogMax {
							backlogMax = due - started
						}
						break
					}
					intended := t0.Add(time.Duration(float64(started) * float64(time.Second) / rate))
					c := clients[next]
					next = (next + 1) % len(clients)
					inFlight.Add(1)
					wg.Add(1)
					go func() {
						defer wg.Done()
						call(c, intended)
						inFlight.Add(-1)
					}()
					started++
				}
				time.Sleep(time.Millisecond)
			}
		}()
	}

	time.Sleep(time.Duration(spec.WarmupMs) * time.Millisecond)
	cpu0 := cpuMs()
	w0 := time.Now()
	measuring.Store(true)
	os.Stdout.WriteString("MEASURE_START\n")
	select {
	case <-time.After(time.Duration(spec.DurationMs) * time.Millisecond):
	case <-done:
	}
	measuring.Store(false)
	windowMs := float64(time.Since(w0).Nanoseconds()) / 1e6
	cpu := cpuMs() - cpu0
	os.Stdout.WriteString("MEASURE_END\n")
	stopped.Store(true)
	waited := make(chan struct{})
	go func() { wg.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
	}
	mu.Lock()
	defer mu.Unlock()
	out := map[string]any{
		"spec": spec, "completed": completed, "errors": errs, "ok": ok, "overLimit": over,
		"backlogMax": backlogMax, "windowMs": math.Round(windowMs),
		"callsPerSecond": math.Round(float64(completed) * 1000 / windowMs),
		"latency":        hist.summary(), "cpuMs": math.Round(cpu),
	}
	if spec.Mode == "open" {
		out["sentLatency"] = sentHist.summary()
	}
	if firstError != "" {
		out["firstError"] = firstError
	}
	b, _ := json.Marshal(out)
	os.Stdout.Write(append(b, '\n'))
	os.Exit(0)
}
