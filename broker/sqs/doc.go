// Package sqs serves the Amazon SQS API over HTTP on Shoal's topics and
// share groups: AWS JSON 1.0 (X-Amz-Target: AmazonSQS.<Action>) and the
// Query protocol (Action=<Action> form posts, XML answers), on a listener
// of its own (shoal.sqs.listen).
//
// A queue is a topic of its name and the share group sqs.<name>; queue
// records (attributes, tags, timestamps) are kept durably by the Backend
// (the broker's metadata store). SendMessage appends a record (value =
// body, headers sqs.message-id and sqs.attr.<name>) and answers once it is
// durable; ReceiveMessage acquires records through the share group's
// direct consumer (package share) with the visibility timeout as the
// acquisition lock; DeleteMessage accepts and ChangeMessageVisibility
// renews or releases, by receipt handles: HMAC-signed (topic id,
// partition, offset, delivery count), so any caller holding one can use
// it, a forged one is ReceiptHandleIsInvalid, and one of an earlier
// delivery is stale (DeleteMessage succeeds without deleting, as AWS
// documents; ChangeMessageVisibility is MessageNotInflight). Kafka
// clients read and write the same topic; a record without a message id
// gets one derived from its position.
//
// Locks: Server.mu guards the queue table; it is held across a queue
// record's durable save, never across a receive or an append.
//
// docs/SQS.md has what is served, what is not yet, and why.
package sqs
