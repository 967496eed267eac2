// Package ratelimit stands in for go-control-plane's envoy/service/ratelimit/v3, which Debian does not package:
// only what the ratelimit service's src/config reads of it (the limit and its unit enum, as the protocol defines them).
package ratelimit

type RateLimitResponse_RateLimit_Unit int32

const (
	RateLimitResponse_RateLimit_UNKNOWN RateLimitResponse_RateLimit_Unit = 0
	RateLimitResponse_RateLimit_SECOND  RateLimitResponse_RateLimit_Unit = 1
	RateLimitResponse_RateLimit_MINUTE  RateLimitResponse_RateLimit_Unit = 2
	RateLimitResponse_RateLimit_HOUR    RateLimitResponse_RateLimit_Unit = 3
	RateLimitResponse_RateLimit_DAY     RateLimitResponse_RateLimit_Unit = 4
	RateLimitResponse_RateLimit_MONTH   RateLimitResponse_RateLimit_Unit = 5
	RateLimitResponse_RateLimit_YEAR    RateLimitResponse_RateLimit_Unit = 6
	RateLimitResponse_RateLimit_WEEK    RateLimitResponse_RateLimit_Unit = 7
)

var RateLimitResponse_RateLimit_Unit_name = map[int32]string{
	0: "UNKNOWN", 1: "SECOND", 2: "MINUTE", 3: "HOUR", 4: "DAY", 5: "MONTH", 6: "YEAR", 7: "WEEK",
}

var RateLimitResponse_RateLimit_Unit_value = map[string]int32{
	"UNKNOWN": 0, "SECOND": 1, "MINUTE": 2, "HOUR": 3, "DAY": 4, "MONTH": 5, "YEAR": 6, "WEEK": 7,
}

func (u RateLimitResponse_RateLimit_Unit) String() string { return RateLimitResponse_RateLimit_Unit_name[int32(u)] }

type RateLimitResponse_RateLimit struct {
	Name            string
	RequestsPerUnit uint32
	Unit            RateLimitResponse_RateLimit_Unit
}
