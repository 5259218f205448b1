package broker

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestReadmeListsServedAPIs keeps the README's compatibility table equal
// to what ApiVersions advertises, so the docs never claim an API we do not
// serve or hide one we do.
func TestReadmeListsServedAPIs(t *testing.T) {
	raw, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	_, table, ok := strings.Cut(string(raw), "<!-- api-table:begin -->")
	require.True(t, ok, "README.md lacks the api-table markers")
	table, _, ok = strings.Cut(table, "<!-- api-table:end -->")
	require.True(t, ok)
	row := regexp.MustCompile(`^\| (\d+) \| (\w+) \| (\d+)–(\d+) \|$`)
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(table), "\n") {
		if m := row.FindStringSubmatch(line); m != nil {
			got = append(got, strings.Join(m[1:], " "))
		}
	}
	var want []string
	var rows []string
	for _, a := range servedAPIs() {
		name := kmsg.NameForKey(a.key)
		want = append(want, fmt.Sprintf("%d %s %d %d", a.key, name, a.min, a.max))
		rows = append(rows, fmt.Sprintf("| %d | %s | %d–%d |", a.key, name, a.min, a.max))
	}
	require.Equal(t, want, got, "README table out of date; it should read:\n| key | API | versions |\n|--:|---|---|\n%s", strings.Join(rows, "\n"))
}
