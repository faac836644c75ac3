package jobs

import "strings"

// vocabulary is the fixed word list of wordcount's generated text: the
// words of Hamlet's soliloquy, the text Apache Flink's WordCount example
// counts by default.
var vocabulary = strings.Fields(`
to be or not that is the question whether tis nobler in mind suffer
slings and arrows of outrageous fortune take arms against a sea troubles
by opposing end them die sleep no more say we an heartache thousand
natural shocks flesh heir consummation devoutly wished perchance dream
ay there rub for what dreams may come when have shuffled off this mortal
coil must give us pause respect makes calamity so long life`)

// maxGeneratedWords is the largest number of words on a generated line.
const maxGeneratedWords = 12

// GeneratedLine returns line i of wordcount's generated text: 1 to 12 words
// of the vocabulary separated by single spaces, frequent words more likely
// than rare ones. It depends on i alone, so the text is the same whatever
// the parallelism, and it is safe for concurrent use.
func GeneratedLine(i int64) string {
	state := uint64(i)
	next := func() uint64 { // splitmix64
		state += 0x9e3779b97f4a7c15
		z := state
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		return z ^ (z >> 31)
	}
	n := 1 + int(next()%maxGeneratedWords)
	var b strings.Builder
	b.Grow(n * 8)
	for k := range n {
		if k > 0 {
			b.WriteByte(' ')
		}
		// The product of two uniform indexes skews toward the front of the
		// list, so counts differ between words, as in real text.
		v := uint64(len(vocabulary))
		r := next()
		b.WriteString(vocabulary[(r%v)*((r>>32)%v)/v])
	}
	return b.String()
}
