package configs

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestListOps(t *testing.T) {
	require.Equal(t, []string{"a", "b"}, SplitList(" a, ,b ,"))
	require.Nil(t, SplitList(""))
	require.Equal(t, "a,b,c", AppendList("a,b", "b, c"))
	require.Equal(t, "c", AppendList("", "c"))
	require.Equal(t, "a,c", SubtractList("a,b,c", "b,x"))
	require.Equal(t, "", SubtractList("a", "a"))
}

func TestValidators(t *testing.T) {
	r := IntRange(-1, 10)
	require.NoError(t, r("-1"))
	require.NoError(t, r("10"))
	require.ErrorContains(t, r("11"), "outside [-1, 10]")
	require.ErrorContains(t, r("1.5"), "not an integer")
	require.NoError(t, OneOf("delete", "compact")("compact"))
	require.Error(t, OneOf("delete")("compact"))
	require.NoError(t, IsBool("false"))
	require.Error(t, IsBool("yes"))
}

func TestEntryEncodings(t *testing.T) {
	v, d := "7", "9"
	e := Entry{Name: "retention.ms", Value: &v, Source: kmsg.ConfigSourceDynamicTopicConfig, Type: kmsg.ConfigTypeLong, Doc: "doc",
		Synonyms: []Synonym{{Name: "retention.ms", Value: &v, Source: kmsg.ConfigSourceDynamicTopicConfig}, {Name: "log.retention.ms", Value: &d, Source: kmsg.ConfigSourceDefaultConfig}}}
	bare := e.DescribeConfig(false, false)
	require.Empty(t, bare.ConfigSynonyms)
	require.Nil(t, bare.Documentation)
	require.False(t, bare.IsDefault)
	full := e.DescribeConfig(true, true)
	require.Len(t, full.ConfigSynonyms, 2)
	require.Equal(t, "log.retention.ms", full.ConfigSynonyms[1].Name)
	require.Equal(t, "doc", *full.Documentation)
	ct := e.CreateTopicsConfig()
	require.Equal(t, int8(kmsg.ConfigSourceDynamicTopicConfig), ct.Source)
	require.Equal(t, []Entry{e}, Filter([]Entry{e, {Name: "other"}}, []string{"retention.ms"}))
	require.Len(t, Filter([]Entry{e, {Name: "other"}}, nil), 2)
}

func TestInt(t *testing.T) {
	require.Equal(t, int64(42), Int("42", 7))
	require.Equal(t, int64(-1), Int("-1", 7))
	require.Equal(t, int64(7), Int("", 7))
	require.Equal(t, int64(7), Int("x", 7))
}
