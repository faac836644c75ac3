package nexmark

import (
	"slices"
	"strconv"
	"strings"

	"github.com/weirstream/weir"
)

// Queries are the implemented queries by name ("q0", "q1", ...): each
// declares the query over events and emits its result rows to an Output.
var Queries = map[string]func(events *weir.DataStream[Event], o Output){
	"q0":  func(ev *weir.DataStream[Event], o Output) { Emit(Q0(ev), o) },
	"q1":  func(ev *weir.DataStream[Event], o Output) { Emit(Q1(ev), o) },
	"q2":  func(ev *weir.DataStream[Event], o Output) { Emit(Q2(ev), o) },
	"q3":  func(ev *weir.DataStream[Event], o Output) { Emit(Q3(ev), o) },
	"q4":  func(ev *weir.DataStream[Event], o Output) { Emit(Q4(ev), o) },
	"q5":  func(ev *weir.DataStream[Event], o Output) { Emit(Q5(ev), o) },
	"q7":  func(ev *weir.DataStream[Event], o Output) { Emit(Q7(ev), o) },
	"q8":  func(ev *weir.DataStream[Event], o Output) { Emit(Q8(ev), o) },
	"q9":  func(ev *weir.DataStream[Event], o Output) { Emit(Q9(ev), o) },
	"q20": func(ev *weir.DataStream[Event], o Output) { Emit(Q20(ev), o) },
	"q11": func(ev *weir.DataStream[Event], o Output) { Emit(Q11(ev), o) },
	"q12": func(ev *weir.DataStream[Event], o Output) { Emit(Q12(ev), o) },
	"q13": func(ev *weir.DataStream[Event], o Output) { Emit(Q13(ev), o) },
	"q14": func(ev *weir.DataStream[Event], o Output) { Emit(Q14(ev), o) },
	"q15": func(ev *weir.DataStream[Event], o Output) { Emit(Q15(ev), o) },
	"q16": func(ev *weir.DataStream[Event], o Output) { Emit(Q16(ev), o) },
	"q17": func(ev *weir.DataStream[Event], o Output) { Emit(Q17(ev), o) },
	"q18": func(ev *weir.DataStream[Event], o Output) { Emit(Q18(ev), o) },
	"q19": func(ev *weir.DataStream[Event], o Output) { Emit(Q19(ev), o) },
	"q21": func(ev *weir.DataStream[Event], o Output) { Emit(Q21(ev), o) },
	"q22": func(ev *weir.DataStream[Event], o Output) { Emit(Q22(ev), o) },
}

// QueryNames returns the names of Queries in numeric order.
func QueryNames() []string {
	names := make([]string, 0, len(Queries))
	for n := range Queries {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int {
		x, _ := strconv.Atoi(strings.TrimPrefix(a, "q"))
		y, _ := strconv.Atoi(strings.TrimPrefix(b, "q"))
		return x - y
	})
	return names
}
