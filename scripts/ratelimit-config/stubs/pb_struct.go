// Package ratelimit stands in for go-control-plane's envoy/extensions/common/ratelimit/v3: a request's descriptor, as
// the ratelimit service's src/config reads it (its entries, and a limit override).
package ratelimit

type RateLimitDescriptor_Entry struct {
	Key   string
	Value string
}

type RateLimitUnit int32

type RateLimitDescriptor_RateLimitOverride struct {
	RequestsPerUnit uint32
	Unit            RateLimitUnit
}

func (o *RateLimitDescriptor_RateLimitOverride) GetRequestsPerUnit() uint32 { return o.RequestsPerUnit }
func (o *RateLimitDescriptor_RateLimitOverride) GetUnit() RateLimitUnit     { return o.Unit }

type RateLimitDescriptor struct {
	Entries []*RateLimitDescriptor_Entry
	Limit   *RateLimitDescriptor_RateLimitOverride
}

func (d *RateLimitDescriptor) GetLimit() *RateLimitDescriptor_RateLimitOverride { return d.Limit }
