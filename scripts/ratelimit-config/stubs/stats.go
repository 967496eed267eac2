// Package stats stands in for the ratelimit service's src/stats (which needs lyft/gostats, not packaged by Debian):
// counters that count nothing, keyed as the service keys them.
package stats

type Counter struct{}

func (Counter) Inc()          {}
func (Counter) Add(_ uint64)  {}
func (Counter) Value() uint64 { return 0 }

type RateLimitStats struct {
	Key                     string
	TotalHits               Counter
	OverLimit               Counter
	NearLimit               Counter
	OverLimitWithLocalCache Counter
	WithinLimit             Counter
	ShadowMode              Counter
}

func (s RateLimitStats) GetKey() string { return s.Key }

type DomainStats struct {
	Key      string
	NotFound Counter
}

type Scope interface{}

type Manager interface {
	NewStats(descriptorKey string) RateLimitStats
	NewDomainStats(domain string) DomainStats
}

type Nothing struct{}

func (Nothing) NewStats(key string) RateLimitStats      { return RateLimitStats{Key: key} }
func (Nothing) NewDomainStats(domain string) DomainStats { return DomainStats{Key: domain} }
