package nexmark

// Internals for the external tests.
var (
	BidTimeType = bidTimeType
	SplitIndex  = splitIndex
	Q12Sized    = q12
)
