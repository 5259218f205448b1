package configs

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Entry is one described config, independent of the response type
// it ends up in.
type Entry struct {
	Name     string
	Value    *string
	Source   kmsg.ConfigSource
	ReadOnly bool
	Type     kmsg.ConfigType
	Doc      string
	Synonyms []Synonym // most specific first, as Kafka orders them
	// Sensitive entries (keys, passwords) are described with a null
	// value and IsSensitive, as Kafka does.
	Sensitive bool
}

// Synonym is one source of an entry's value (the topic override, the
// dynamic or static broker default, Kafka's default), as DescribeConfigs
// reports synonyms.
type Synonym struct {
	Name   string
	Value  *string
	Source kmsg.ConfigSource
}

// Filter keeps the entries named in names; a null or empty
// list keeps all. Unknown names are simply not answered, as in Kafka.
func Filter(entries []Entry, names []string) []Entry {
	if len(names) == 0 {
		return entries
	}
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	var out []Entry
	for _, e := range entries {
		if want[e.Name] {
			out = append(out, e)
		}
	}
	return out
}

// DescribeConfig is e as a DescribeConfigs result, with synonyms and
// documentation when asked for.
func (e *Entry) DescribeConfig(synonyms, docs bool) kmsg.DescribeConfigsResponseResourceConfig {
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name, c.Value, c.ReadOnly, c.Source = e.Name, e.Value, e.ReadOnly, e.Source
	c.IsDefault = e.Source == kmsg.ConfigSourceDefaultConfig
	c.ConfigType = e.Type
	if e.Sensitive {
		c.Value, c.IsSensitive = nil, true
	}
	if synonyms {
		for _, s := range e.Synonyms {
			cs := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			cs.Name, cs.Value, cs.Source = s.Name, s.Value, s.Source
			if e.Sensitive {
				cs.Value = nil
			}
			c.ConfigSynonyms = append(c.ConfigSynonyms, cs)
		}
	}
	if docs && e.Doc != "" {
		d := e.Doc
		c.Documentation = &d
	}
	return c
}

// CreateTopicsConfig is e as a CreateTopics v5+ topic config.
func (e *Entry) CreateTopicsConfig() kmsg.CreateTopicsResponseTopicConfig {
	c := kmsg.NewCreateTopicsResponseTopicConfig()
	c.Name, c.Value, c.ReadOnly, c.Source = e.Name, e.Value, e.ReadOnly, int8(e.Source)
	return c
}

// SplitList splits a LIST config value ("a,b") into trimmed items.
func SplitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// AppendList adds the items of add missing from base, keeping base's
// order.
func AppendList(base, add string) string {
	items := SplitList(base)
	for _, a := range SplitList(add) {
		found := false
		for _, it := range items {
			found = found || it == a
		}
		if !found {
			items = append(items, a)
		}
	}
	return strings.Join(items, ",")
}

// SubtractList removes the items of sub from base, keeping base's order.
func SubtractList(base, sub string) string {
	drop := map[string]bool{}
	for _, s := range SplitList(sub) {
		drop[s] = true
	}
	var items []string
	for _, it := range SplitList(base) {
		if !drop[it] {
			items = append(items, it)
		}
	}
	return strings.Join(items, ",")
}
