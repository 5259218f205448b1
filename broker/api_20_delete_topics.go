package broker

// DeleteTopics (20).
//
// Behavior: each topic is removed from the metadata store first (so it
// stays deleted after a crash), then from the registry, then its logs are
// deleted (topics.Admin.Delete); long polls on its partitions are
// woken. An unknown name gets UNKNOWN_TOPIC_OR_PARTITION, an unknown id
// UNKNOWN_TOPIC_ID. A name or id given twice in one request gets
// INVALID_REQUEST ("Duplicate topic name." / "Duplicate topic id."),
// answered once, as Kafka does; so does a v6 entry with both a name and
// an id, or neither. The partitions deleted count against the client's
// controller_mutation_rate (quota_mutation.go): THROTTLING_QUOTA_EXCEEDED
// in reject mode from v5, else throttled.
//
// Version notes: v0 is gone from Kafka 4 and not served; v1 adds
// throttle time; v2 and v3 are the same (v2: throttling after the
// response); v4 is flexible; v5 adds per-topic error messages; v6 names
// topics by name or by id and answers with both.
//
// Authorization: Delete on the topic (TOPIC_AUTHORIZATION_FAILED, for a
// named topic whether or not it exists; by id, the name is not told).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/acl"
	"github.com/shoal-mq/shoal/broker/kafkaerr"
	"github.com/shoal-mq/shoal/broker/topics"
)

func init() { registerSimple(20, 1, 6, handleDeleteTopics) }

func handleDeleteTopics(c *conn, req *kmsg.DeleteTopicsRequest) kmsg.Response {
	b := c.b
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	reqs := req.Topics
	if req.Version < 6 {
		reqs = make([]kmsg.DeleteTopicsRequestTopic, len(req.TopicNames))
		for i := range req.TopicNames {
			reqs[i].Topic = &req.TopicNames[i]
		}
	}
	names := map[string]int{}
	ids := map[[16]byte]int{}
	for _, rt := range reqs {
		if rt.Topic != nil {
			names[*rt.Topic]++
		}
		if rt.TopicID != ([16]byte{}) {
			ids[rt.TopicID]++
		}
	}
	answeredName := map[string]bool{}
	answeredID := map[[16]byte]bool{}
	for _, rt := range reqs {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		var err error
		switch {
		case rt.Topic != nil && rt.TopicID != ([16]byte{}):
			err = kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "You may not specify both topic name and topic id.")
		case rt.Topic == nil && rt.TopicID == ([16]byte{}):
			err = kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "Neither topic name nor id were specified.")
		case rt.Topic != nil && names[*rt.Topic] > 1:
			if answeredName[*rt.Topic] {
				continue
			}
			answeredName[*rt.Topic] = true
			err = kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "Duplicate topic name.")
		case rt.Topic == nil && ids[rt.TopicID] > 1:
			if answeredID[rt.TopicID] {
				continue
			}
			answeredID[rt.TopicID] = true
			err = kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "Duplicate topic id.")
		default:
			var t *topics.Topic
			if rt.Topic != nil {
				if t = b.topics.Get(*rt.Topic); t == nil {
					err = kafkaerr.Refuse(kafkaerr.ErrUnknownTopic, "This server does not host this topic-partition.")
				}
			} else if t = b.topics.GetID(rt.TopicID); t == nil {
				err = kafkaerr.Refuse(kafkaerr.ErrUnknownTopicID, "This server does not host this topic ID.")
			}
			if rt.Topic != nil && !c.mayTopic(acl.Delete, *rt.Topic) || t != nil && rt.Topic == nil && !c.mayTopic(acl.Delete, t.Name) {
				// By name, before existence; by id, without the name (Kafka
				// leaks neither).
				t, st.Topic = nil, rt.Topic
				err = kafkaerr.Refuse(kafkaerr.ErrTopicAuthorization, "Authorization failed.")
			}
			if t != nil {
				name := t.Name
				st.Topic, st.TopicID = &name, t.ID
				// controller_mutation_rate (quota_mutation.go), v5+ may refuse.
				if err = c.mutationAllowed(req.Version >= 5, false); err != nil {
					break
				}
				parts, _ := b.topics.Snapshot(t)
				// Committed offsets and share-group state of the topic
				// go with it (deleteTopic), so a re-created topic of the
				// same name starts fresh.
				err = b.topicAdmin.Delete(t)
				if err == nil {
					c.mutationCharge(req.Version >= 5, len(parts))
				}
			}
		}
		st.ErrorCode = kafkaerr.Code(err)
		if req.Version >= 5 {
			st.ErrorMessage = kafkaerr.Message(err)
		}
		if st.ErrorCode == kerr.KafkaStorageError.Code {
			b.lg.Error("delete topic failed", zapErr(err))
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
