// Package tcpnet is the TCP transport of the data plane: it carries the
// channels of an exchange (package network) between the task managers of a
// cluster, with the same two roles as the in-process LocalConnection. A
// sender (ConnectSender) takes buffers from a producer's Subpartition with
// the credit the receiver granted and writes them to a connection; a
// receiver (ConnectReceiver) reads them into buffers of its own pool and
// delivers them to a channel of an InputGate, and sends the credit the gate
// grants back.
//
// # Nodes and connections
//
// A Node is one process's endpoint: it listens on one address and names
// itself by it (Config.AdvertiseAddr), and peers are named by theirs. The
// node of a receiver dials the node of its sender, as Apache Flink's
// consumer requests its partition from the producer: so a connection
// carries the channels whose receivers are on the dialing node and whose
// senders are on the accepting node, multiplexed, with data flowing to the
// dialer and credit to the acceptor. Two nodes that consume from each other
// therefore hold two connections, one per direction of the data, each
// dialed by its consumer; when both dial at once, nothing is to be decided:
// there is never a second connection for the same direction to reconcile.
// A node dials a peer once and shares the connection among its receivers;
// a sender waits, without a connection, until its receiver opens the
// channel over the connection its node dialed.
//
// Each connection has one reader and one writer goroutine. The writer
// serves a queue of work, control frames (open, credit, buffer size) of
// receivers first, then senders with data available in round-robin order,
// one buffer per turn, so that a channel with a long queue does not hold the
// others up. It polls a subpartition only when it can write, so buffers
// wait in the subpartition, where a priority event overtakes them, and not
// in a user-space queue of the transport: a priority event waits for the
// frames already in the write buffer and at most one buffer of every other
// busy channel. Frames are batched in a bufio.Writer that is flushed when
// the queue is empty; a data buffer is recycled into the producer's pool as
// soon as its bytes were copied into the write buffer or written to the
// socket. The reader reads data frames straight into buffers of the
// receiver's pool. Neither allocates per buffer.
//
// # Handshake
//
// The dialer sends a hello frame (magic, protocol version, a random nonce,
// its advertised address); the acceptor answers with its own hello and a
// proof, HMAC-SHA256 keyed by Config.Token over both nonces; the dialer
// checks it and sends its own proof, which the acceptor checks. The token
// never crosses the wire, and both sides learn that the other holds the
// same token (an empty token on both sides matches; an empty and a set one
// do not). A dialer whose peer holds another token gets ErrTokenMismatch.
// With TLS (Config.ServerTLS and ClientTLS) the handshake runs inside the
// TLS session; mutual TLS is the ServerTLS's ClientAuth.
//
// # Wire format
//
// Every frame is length-prefixed; integers are big-endian:
//
//	frame     = length:u32 type:u8 body       length counts type and body
//	hello     = magic:u32 ("WEIR") version:u16 nonce:[16] proof:[32] addr-len:u16 addr
//	proof     = proof:[32]
//	channel   = attempt:u64 edge:u32 from:u32 to:u32
//	open      = channel credit:u32             receiver -> sender, first on a channel
//	credit    = channel n:u32                  receiver -> sender
//	size      = channel size:u32               receiver -> sender (buffer debloating)
//	backlog   = channel backlog:u32            sender -> receiver, without credit
//	data      = channel kind:u8 backlog:u32 payload
//	event     = channel backlog:u32 kind:u8 flags:u8 id:i64 timestamp:i64
//	            checkpoint-kind:u8 checkpoint-format:u8 last-completed:i64
//	            aligned-timeout-ns:i64 target-len:u16 target
//	heartbeat = (no body)                     either way, when idle
//
// Event flags are priority (1), idle (2), and the checkpoint options
// unaligned (4), synchronous (8) and drain (16). The data payload is the
// buffer's bytes; its kind is the network.Kind (data, fragment, fragment
// end); it must fit the receiver's segment size.
//
// # Channels, attempts and failures
//
// A channel is named by ChannelID: the job attempt and the edge, producer
// and consumer subtask, so that the frames of an attempt that is gone find
// no channel and are dropped (CloseAttempt forgets an attempt's channels on
// both roles). Nothing is sent on a channel before its receiver opened it;
// events need no credit, data buffers one each, as in the in-process
// exchange. A protocol violation (a data buffer without credit, a frame that
// does not parse) and any I/O error close the connection: its channels
// fail (senders stop polling, receivers drop what comes) and
// Config.OnPeerLost is called once for the connection (so up to twice for
// a peer that is connected both ways), so that the owner fails the job
// attempt. A peer that dies without closing is found by heartbeats: an idle
// writer sends one every Config.HeartbeatInterval, and a connection that
// receives nothing for Config.HeartbeatTimeout fails; a write that makes no
// progress for Config.WriteTimeout fails the connection too, so a dead
// peer never blocks a writer forever. Producers and consumers never block
// on the network at all.
package tcpnet
