// The go-control-plane side of the bench's xDS fan-out comparison (phases/xds-compare.ts): a
// SnapshotCache ADS server (SotW) serving RateLimitConfig resources, every node on one snapshot
// (a constant node hash, as a control plane serving one config to many pods sets it up), built with
// go-control-plane as a Go control plane would be. It speaks the same line protocol as our side
// (phases/xds-compare-process.ts), so the phase drives both the same way:
//
//	bench-go-xds <domains> <descriptors>   -> prints "PORT <n>" once listening on 127.0.0.1
//	stdin "change <i>"                     -> domain i gets a new generation; a new snapshot is set;
//	                                          prints "SET" after SetSnapshot returned
//
// Content is identical to our side's: domain d<i> (resource name and domain), <descriptors> descriptors
// key "tenant", value "t<j>", MINUTE, requests_per_unit 1000 + j + generation(i).
package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cache "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resource "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	server "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	rls "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"time"
)

// oneSnapshot serves every node the same snapshot.
type oneSnapshot struct{}

func (oneSnapshot) ID(*core.Node) string { return "all" }

func domain(i, descriptors, generation int) *rls.RateLimitConfig {
	name := fmt.Sprintf("d%d", i)
	c := &rls.RateLimitConfig{Name: name, Domain: name}
	for j := 0; j < descriptors; j++ {
		c.Descriptors = append(c.Descriptors, &rls.RateLimitDescriptor{
			Key:   "tenant",
			Value: fmt.Sprintf("t%d", j),
			RateLimit: &rls.RateLimitPolicy{
				Unit:            rls.RateLimitUnit_MINUTE,
				RequestsPerUnit: uint32(1000 + j + generation),
			},
		})
	}
	return c
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: bench-go-xds <domains> <descriptors>")
		os.Exit(2)
	}
	domains, _ := strconv.Atoi(os.Args[1])
	descriptors, _ := strconv.Atoi(os.Args[2])
	generations := make([]int, domains)
	resources := make([]types.Resource, domains)
	for i := range resources {
		resources[i] = domain(i, descriptors, 0)
	}
	snapshots := cache.NewSnapshotCache(true, oneSnapshot{}, nil)
	version := 0
	set := func() {
		version++
		list := make([]types.Resource, len(resources))
		copy(list, resources)
		snap, err := cache.NewSnapshot(strconv.Itoa(version), map[resource.Type][]types.Resource{
			resource.RateLimitConfigType: list,
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if err := snapshots.SetSnapshot(context.Background(), "all", snap); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	set()

	grpcServer := grpc.NewServer(
		grpc.MaxConcurrentStreams(1000000),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{PermitWithoutStream: true}),
		grpc.MaxSendMsgSize(4<<20),
	)
	discovery.RegisterAggregatedDiscoveryServiceServer(grpcServer, server.NewServer(context.Background(), snapshots, nil))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("PORT %d\n", lis.Addr().(*net.TCPAddr).Port)
	go func() {
		if err := grpcServer.Serve(lis); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}()

	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) == 2 && f[0] == "change" {
			i, err := strconv.Atoi(f[1])
			if err != nil || i < 0 || i >= domains {
				fmt.Fprintln(os.Stderr, "bad change:", in.Text())
				continue
			}
			generations[i]++
			resources[i] = domain(i, descriptors, generations[i])
			set()
			fmt.Println("SET")
		}
	}
	// stdin closed: the phase is done with us.
	grpcServer.Stop()
}
