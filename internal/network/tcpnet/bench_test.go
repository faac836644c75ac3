package tcpnet

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/weirstream/weir/internal/network"
)

// BenchmarkExchange moves full 32 KiB buffers from producers to one
// consumer gate through the in-process transport (LocalConnection) and
// over loopback TCP between two nodes (plain and TLS), with 2 exclusive
// credits per channel and 8 floating, as the task executor's defaults. One
// op is one buffer: MB/s is the bytes moved, buffers/s the buffers.
func BenchmarkExchange(b *testing.B) {
	for _, transport := range []string{"local", "tcp", "tls"} {
		for _, channels := range []int{1, 4} {
			b.Run(fmt.Sprintf("%s/channels=%d", transport, channels), func(b *testing.B) {
				benchExchange(b, transport, channels)
			})
		}
	}
}

func benchExchange(b *testing.B, transport string, channels int) {
	const segment = 32 << 10
	g := network.NewInputGate(channels, 2, 8)
	subs := make([]*network.PipelinedSubpartition, channels)
	for ch := range subs {
		subs[ch] = network.NewPipelinedSubpartition()
	}
	switch transport {
	case "local":
		for ch, sub := range subs {
			network.ConnectLocal(sub, g, ch)
		}
	default:
		var ca, cb Config
		if transport == "tls" {
			pki := newCA(b, "bench CA")
			ca, cb = mtls(pki, pki.issue(b, "a")), mtls(pki, pki.issue(b, "b"))
		}
		a, bn := newNode(b, ca), newNode(b, cb)
		_, capacity := g.BufferUsage()
		rpool := network.NewPool(capacity, segment)
		for ch, sub := range subs {
			id := ChannelID{Attempt: 1, From: uint32(ch)}
			if err := a.ConnectSender(bn.Addr(), id, sub); err != nil {
				b.Fatal(err)
			}
			if err := bn.ConnectReceiver(context.Background(), a.Addr(), id, g, ch, rpool); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.SetBytes(segment)
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for ch, sub := range subs {
		n := b.N / channels
		if ch < b.N%channels {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			pool := network.NewPool(16, segment)
			for range n {
				buf, err := pool.Request(context.Background())
				if err != nil {
					panic(err)
				}
				buf.Data = buf.Data[:segment]
				sub.Send(buf)
			}
			sub.Send(network.NewEventBuffer(network.Event{Kind: network.EventEndOfPartition}))
		}()
	}
	for ended := 0; ended < channels; {
		ch, buf, ok := g.Poll()
		if !ok {
			<-g.Notify()
			continue
		}
		if buf.IsData() {
			g.Release(ch, buf)
		} else if buf.Event.Kind == network.EventEndOfPartition {
			ended++
		}
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "buffers/s")
}
