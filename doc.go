// Package weir is a stateful stream processor: a job is ordinary Go code that
// declares a dataflow, and weir runs it in parallel.
//
// A job starts from an Environment, reads from sources, transforms records
// with generic functions (Go methods cannot take type parameters) and writes
// to sinks:
//
//	env := weir.NewEnvironment(weir.Options{Parallelism: 4})
//	lines := weir.FromSource(env, source.TextFile("in.txt"))
//	words := weir.FlatMap(lines, func(line string, out weir.Collector[string]) {
//		for _, w := range strings.Fields(line) {
//			out.Collect(w)
//		}
//	})
//	counts := weir.ProcessEach(weir.KeyBy(words, func(w string) string { return w }).Stream(),
//		func() weir.ProcessFunction[string, codec.Pair[string, int64]] { return &countWords{} })
//	weir.SinkTo(counts, sink.Print[codec.Pair[string, int64]]())
//	err := env.Execute(ctx, "wordcount")
//
// Every operator runs as parallel subtasks, one goroutine each. Operators
// connected by a forward edge with equal parallelism are chained: records
// pass between them by direct calls. Other edges serialize records with the
// stream's codec (see package codec) into network buffers with credit-based
// flow control, so a slow operator slows its producers down instead of
// buffering without bound. KeyBy partitions by key group, as Apache Flink
// does, so keyed state can later be rescaled.
//
// A failing user function ends the job with an *OperatorError naming the
// operator and subtask; a panic in user code is recovered into one.
package weir
