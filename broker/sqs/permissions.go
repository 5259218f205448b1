package sqs

import (
	"encoding/json"
	"net/http"
	"regexp"
)

// AddPermission and RemovePermission edit the queue's Policy as AWS
// does (a statement per label); the policy is stored and answered, not
// enforced: Shoal authorizes SQS requests with its ACLs (docs/SQS.md).

func init() {
	register("AddPermission", (*Server).addPermission)
	register("RemovePermission", (*Server).removePermission)
}

type policyDoc struct {
	Version   string            `json:"Version"`
	ID        string            `json:"Id"`
	Statement []json.RawMessage `json:"Statement"`
}

type statement struct {
	Sid       string              `json:"Sid"`
	Effect    string              `json:"Effect"`
	Principal map[string][]string `json:"Principal"`
	Action    []string            `json:"Action"`
	Resource  string              `json:"Resource"`
}

var labelRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,80}$`)

var permissionActions = map[string]bool{"*": true, "SendMessage": true, "ReceiveMessage": true, "DeleteMessage": true,
	"ChangeMessageVisibility": true, "GetQueueAttributes": true, "GetQueueUrl": true, "ListDeadLetterSourceQueues": true,
	"PurgeQueue": true, "ListQueueTags": true}

func (s *Server) addPermission(_ *http.Request, in input) (any, *apiError) {
	q, aerr := s.queueFrom(in)
	if aerr != nil {
		return nil, aerr
	}
	label, aerr := in.required("Label")
	if aerr != nil {
		return nil, aerr
	}
	if !labelRE.MatchString(label) {
		return nil, invalidParam("Value %s for parameter Label is invalid. Reason: Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length.", label)
	}
	accounts, aerr := in.strings("AWSAccountIds")
	if aerr != nil {
		return nil, aerr
	}
	acts, aerr := in.strings("Actions")
	if aerr != nil {
		return nil, aerr
	}
	if len(accounts) == 0 {
		return nil, missingParam("AWSAccountIds")
	}
	if len(acts) == 0 {
		return nil, missingParam("Actions")
	}
	st := statement{Sid: label, Effect: "Allow", Principal: map[string][]string{}, Resource: s.arn(q.Name)}
	for _, a := range accounts {
		st.Principal["AWS"] = append(st.Principal["AWS"], "arn:aws:iam::"+a+":root")
	}
	for _, a := range acts {
		if !permissionActions[a] {
			return nil, invalidParam("Value SQS:%s for parameter ActionName is invalid. Reason: Only the queue owner is allowed to invoke this action.", a)
		}
		st.Action = append(st.Action, "SQS:"+a)
	}
	return s.editPolicy(q, func(doc *policyDoc) *apiError {
		for _, raw := range doc.Statement {
			var e statement
			if json.Unmarshal(raw, &e) == nil && e.Sid == label {
				return invalidParam("Value %s for parameter Label is invalid. Reason: Already exists.", label)
			}
		}
		raw, _ := json.Marshal(st)
		doc.Statement = append(doc.Statement, raw)
		return nil
	})
}

func (s *Server) removePermission(_ *http.Request, in input) (any, *apiError) {
	q, aerr := s.queueFrom(in)
	if aerr != nil {
		return nil, aerr
	}
	label, aerr := in.required("Label")
	if aerr != nil {
		return nil, aerr
	}
	return s.editPolicy(q, func(doc *policyDoc) *apiError {
		for i, raw := range doc.Statement {
			var e statement
			if json.Unmarshal(raw, &e) == nil && e.Sid == label {
				doc.Statement = append(doc.Statement[:i], doc.Statement[i+1:]...)
				return nil
			}
		}
		return invalidParam("Value %s for parameter Label is invalid. Reason: can't find label.", label)
	})
}

// editPolicy changes q's Policy document durably.
func (s *Server) editPolicy(q *queue, edit func(*policyDoc) *apiError) (any, *apiError) {
	aerr := s.update(q.Name, func(next *queue) *apiError {
		doc := policyDoc{Version: "2012-10-17", ID: s.arn(next.Name) + "/SQSDefaultPolicy"}
		if cur := next.Attrs["Policy"]; cur != "" {
			if err := json.Unmarshal([]byte(cur), &doc); err != nil {
				return invalidParam("The queue's Policy is not a policy document: %v", err)
			}
		}
		if aerr := edit(&doc); aerr != nil {
			return aerr
		}
		if len(doc.Statement) == 0 {
			delete(next.Attrs, "Policy")
		} else {
			b, _ := json.Marshal(doc)
			next.Attrs["Policy"] = string(b)
		}
		return nil
	})
	if aerr != nil {
		return nil, aerr
	}
	return map[string]any{}, nil
}
