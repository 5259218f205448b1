package sqs

// The Query protocol (AWS's legacy form posts, XML answers), which
// Debian's python3-boto3 1.26 and awscli 2.9 speak: the form is rebuilt
// into the JSON protocol's shape (queryInput) and the JSON shape of the
// answer is written as the XML the Query protocol has (writeQuery).

import (
	"bytes"
	"encoding/xml"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// flattened lists and maps of the Query protocol: form prefix → JSON member.
var queryLists = map[string]string{
	"AttributeName":              "AttributeNames",
	"MessageAttributeName":       "MessageAttributeNames",
	"MessageSystemAttributeName": "MessageSystemAttributeNames",
	"TagKey":                     "TagKeys",
	"AWSAccountId":               "AWSAccountIds",
	"ActionName":                 "Actions",
}

var queryEntries = map[string]bool{
	"SendMessageBatchRequestEntry":             true,
	"DeleteMessageBatchRequestEntry":           true,
	"ChangeMessageVisibilityBatchRequestEntry": true,
}

// queryInput rebuilds an action's parameters from its form.
func queryInput(action string, form url.Values) (input, *apiError) {
	flat := map[string]string{}
	for k, v := range form {
		if len(v) > 0 && k != "Action" && k != "Version" {
			flat[k] = v[0]
		}
	}
	in := unflatten(flat)
	if action == "TagQueue" {
		if t, ok := in["tags"]; ok {
			in["Tags"] = t
			delete(in, "tags")
		}
	}
	return in, nil
}

// unflatten turns Prefix.N.Field keys into lists and maps.
func unflatten(flat map[string]string) input {
	in := input{}
	groups := map[string]map[int]map[string]string{} // prefix → index → rest → value
	for k, v := range flat {
		prefix, rest, ok := strings.Cut(k, ".")
		if !ok {
			in[k] = v
			continue
		}
		num, sub, _ := strings.Cut(rest, ".")
		n, err := strconv.Atoi(num)
		if err != nil {
			in[k] = v
			continue
		}
		if groups[prefix] == nil {
			groups[prefix] = map[int]map[string]string{}
		}
		if groups[prefix][n] == nil {
			groups[prefix][n] = map[string]string{}
		}
		groups[prefix][n][sub] = v
	}
	for prefix, byIndex := range groups {
		idx := make([]int, 0, len(byIndex))
		for n := range byIndex {
			idx = append(idx, n)
		}
		sort.Ints(idx)
		switch {
		case queryLists[prefix] != "":
			var l []any
			for _, n := range idx {
				l = append(l, byIndex[n][""])
			}
			in[queryLists[prefix]] = l
		case queryEntries[prefix]:
			var l []any
			for _, n := range idx {
				l = append(l, map[string]any(unflatten(byIndex[n])))
			}
			in["Entries"] = l
		case prefix == "Attribute" || prefix == "Tag":
			m := map[string]any{}
			key := "Name"
			member := "Attributes"
			if prefix == "Tag" {
				key, member = "Key", "tags"
			}
			for _, n := range idx {
				m[byIndex[n][key]] = byIndex[n]["Value"]
			}
			in[member] = m
		case prefix == "MessageAttribute" || prefix == "MessageSystemAttribute":
			m := map[string]any{}
			for _, n := range idx {
				e := byIndex[n]
				v := map[string]any{}
				for _, f := range []string{"DataType", "StringValue", "BinaryValue"} {
					if s, ok := e["Value."+f]; ok {
						v[f] = s
					}
				}
				m[e["Name"]] = v
			}
			in[prefix+"s"] = m
		}
	}
	return in
}

const queryNS = "http://queue.amazonaws.com/doc/2012-11-05/"

// resultless actions answer with ResponseMetadata only.
var resultless = map[string]bool{
	"DeleteQueue": true, "SetQueueAttributes": true, "PurgeQueue": true, "DeleteMessage": true,
	"ChangeMessageVisibility": true, "TagQueue": true, "UntagQueue": true, "AddPermission": true, "RemovePermission": true,
}

// batchEntryNames are the XML element names of batch results.
var batchEntryNames = map[string]string{
	"SendMessageBatch":             "SendMessageBatchResultEntry",
	"DeleteMessageBatch":           "DeleteMessageBatchResultEntry",
	"ChangeMessageVisibilityBatch": "ChangeMessageVisibilityBatchResultEntry",
}

type xmlWriter struct{ b bytes.Buffer }

func (x *xmlWriter) open(name string) {
	x.b.WriteByte('<')
	x.b.WriteString(name)
	x.b.WriteByte('>')
}

func (x *xmlWriter) close(name string) {
	x.b.WriteString("</")
	x.b.WriteString(name)
	x.b.WriteByte('>')
}

func (x *xmlWriter) elem(name, v string) {
	x.open(name)
	if plainXML(v) {
		x.b.WriteString(v)
	} else {
		_ = xml.EscapeText(&x.b, []byte(v))
	}
	x.close(name)
}

// plainXML reports whether xml.EscapeText would write v unchanged:
// printable ASCII without the five characters it escapes (most message
// bodies, ids and handles), so elem copies it without the conversion.
func plainXML(v string) bool {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c < 0x20 || c >= 0x7f, c == '"', c == '\'', c == '&', c == '<', c == '>':
			return false
		}
	}
	return true
}

func writeQuery(w http.ResponseWriter, action string, out any, reqID string) {
	var x xmlWriter
	x.b.WriteString(`<?xml version="1.0"?><` + action + `Response xmlns="` + queryNS + `">`)
	if !resultless[action] {
		x.open(action + "Result")
		if m, ok := out.(map[string]any); ok {
			x.members(action, m)
		}
		x.close(action + "Result")
	}
	x.open("ResponseMetadata")
	x.elem("RequestId", reqID)
	x.close("ResponseMetadata")
	x.close(action + "Response")
	writeBody(w, http.StatusOK, "text/xml", x.b.Bytes())
}

func (x *xmlWriter) members(action string, m map[string]any) {
	for _, k := range sortedNames(m) {
		switch v := m[k].(type) {
		case string:
			x.elem(k, v)
		case bool:
			x.elem(k, strconv.FormatBool(v))
		case int:
			x.elem(k, strconv.Itoa(v))
		case int64:
			x.elem(k, strconv.FormatInt(v, 10))
		case []string: // QueueUrls and the like: flattened, singular
			name := strings.TrimSuffix(k, "s")
			if name == "queueUrl" {
				name = "QueueUrl" // ListDeadLetterSourceQueues' JSON member is queueUrls
			}
			for _, e := range v {
				x.elem(name, e)
			}
		case map[string]string: // Attributes, Tags
			name, key := "Attribute", "Name"
			if k == "Tags" {
				name, key = "Tag", "Key"
			}
			for _, n := range sortedNames(v) {
				x.open(name)
				x.elem(key, n)
				x.elem("Value", v[n])
				x.close(name)
			}
		case map[string]any: // MessageAttributes
			for _, n := range sortedNames(v) {
				x.open("MessageAttribute")
				x.elem("Name", n)
				x.open("Value")
				if a, ok := v[n].(map[string]any); ok {
					x.members(action, a)
				}
				x.close("Value")
				x.close("MessageAttribute")
			}
		case []map[string]any:
			name := strings.TrimSuffix(k, "s") // Messages → Message
			switch k {
			case "Successful":
				name = batchEntryNames[action]
			case "Failed":
				name = "BatchResultErrorEntry"
			}
			for _, e := range v {
				x.open(name)
				x.members(action, e)
				x.close(name)
			}
		}
	}
}

func writeQueryError(w http.ResponseWriter, e *apiError, reqID string) {
	var x xmlWriter
	typ := "Sender"
	if e.receiver {
		typ = "Receiver"
	}
	x.b.WriteString(`<?xml version="1.0"?><ErrorResponse xmlns="` + queryNS + `">`)
	x.open("Error")
	x.elem("Type", typ)
	x.elem("Code", e.legacy)
	x.elem("Message", e.msg)
	x.b.WriteString("<Detail/>")
	x.close("Error")
	x.elem("RequestId", reqID)
	x.close("ErrorResponse")
	writeBody(w, e.status, "text/xml", x.b.Bytes())
}
