package cluster

import (
	"context"

	"github.com/weirstream/weir/internal/network"
	"github.com/weirstream/weir/internal/network/tcpnet"
)

// tcpPlane is the TCP data plane (internal/network/tcpnet): one node per
// task manager, one multiplexed connection per pair of task managers and
// direction of data.
type tcpPlane struct{ n *tcpnet.Node }

// newTCPDataPlane listens on cfg.DataAddress with the cluster's security.
func newTCPDataPlane(ctx context.Context, cfg TaskManagerConfig, onLost func(peer string, err error)) (DataPlane, error) {
	server, client, err := cfg.Security.tlsConfigs()
	if err != nil {
		return nil, err
	}
	n, err := tcpnet.Listen(ctx, cfg.DataAddress, tcpnet.Config{ServerTLS: server, ClientTLS: client, Token: cfg.Security.Token,
		Logger: cfg.Logger, OnPeerLost: onLost, HeartbeatInterval: cfg.HeartbeatInterval, HeartbeatTimeout: cfg.HeartbeatTimeout})
	if err != nil {
		return nil, err
	}
	return tcpPlane{n}, nil
}

func (p tcpPlane) Addr() string { return p.n.Addr() }

func (p tcpPlane) ConnectSender(peer string, id ChannelID, sub network.Subpartition) error {
	return p.n.ConnectSender(peer, tcpnet.ChannelID(id), sub)
}

func (p tcpPlane) ConnectReceiver(peer string, id ChannelID, g *network.InputGate, ch int, pool *network.Pool) error {
	// The dial is bounded by the node's dial timeout.
	return p.n.ConnectReceiver(context.Background(), peer, tcpnet.ChannelID(id), g, ch, pool)
}

func (p tcpPlane) CloseAttempt(attempt uint64) { p.n.CloseAttempt(attempt) }
func (p tcpPlane) Close() error                { return p.n.Close() }
