package protocol

import "strings"

// Wire rules the group coordinators share (consumer groups in
// broker/groups, share groups in broker/share).

// GroupAllOperations is the AuthorizedOperations bit set of a group:
// READ, DELETE, DESCRIBE (ACL operation codes 3, 6, 8). Shoal has no ACLs.
const GroupAllOperations = 1<<3 | 1<<6 | 1<<8

// ContainsFold reports whether list holds s, ignoring case and the
// spaces around an entry: how ListGroups matches its state and type
// filters.
func ContainsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(strings.TrimSpace(v), s) {
			return true
		}
	}
	return false
}
