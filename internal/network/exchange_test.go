package network

// connectLocal connects a new PipelinedSubpartition to every channel of g
// and returns them, indexed by channel.
func connectLocal(g *InputGate) []*PipelinedSubpartition {
	subs := make([]*PipelinedSubpartition, g.NumChannels())
	for ch := range subs {
		subs[ch] = NewPipelinedSubpartition()
		ConnectLocal(subs[ch], g, ch)
	}
	return subs
}
