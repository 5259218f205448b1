package sqs

import (
	"fmt"
	"net/http"
)

// apiError is an SQS error as AWS answers it: the JSON protocol's
// __type (the model's shape name), the legacy Query code (the
// x-amzn-query-error header and the Query protocol's <Code>), the HTTP
// status and the message. Both spellings go out on every answer: botocore
// takes its exception class from __type and Error.Code from the header,
// smithy-go (aws-sdk-go-v2) the same (docs/SQS.md).
type apiError struct {
	status   int
	shape    string // __type, without a namespace for the shapes the SQS model has
	legacy   string // x-amzn-query-error and Query <Code>
	msg      string
	receiver bool // the server's fault (Receiver), else the caller's (Sender)
}

func (e *apiError) Error() string { return e.legacy + ": " + e.msg }

// errf builds the error kind k with a formatted message.
func errf(k errKind, format string, args ...any) *apiError {
	return &apiError{status: k.status, shape: k.shape, legacy: k.legacy, msg: fmt.Sprintf(format, args...)}
}

type errKind struct {
	status        int
	shape, legacy string
}

// The SQS model's errors and the unmodelled ones AWS answers with
// (com.amazon.coral.service shapes), with their legacy codes.
var (
	errQueueDoesNotExist      = errKind{400, "com.amazonaws.sqs#QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue"}
	errQueueNameExists        = errKind{400, "com.amazonaws.sqs#QueueNameExists", "QueueAlreadyExists"}
	errQueueDeletedRecently   = errKind{400, "com.amazonaws.sqs#QueueDeletedRecently", "AWS.SimpleQueueService.QueueDeletedRecently"}
	errInvalidParameterValue  = errKind{400, "com.amazon.coral.service#InvalidParameterValueException", "InvalidParameterValue"}
	errMissingParameter       = errKind{400, "com.amazon.coral.service#MissingRequiredParameterException", "MissingParameter"}
	errInvalidAction          = errKind{400, "com.amazon.coral.service#InvalidActionException", "InvalidAction"}
	errAccessDenied           = errKind{403, "com.amazon.coral.service#AccessDeniedException", "AccessDenied"}
	errInvalidAttributeName   = errKind{400, "com.amazonaws.sqs#InvalidAttributeName", "InvalidAttributeName"}
	errInvalidAttributeValue  = errKind{400, "com.amazonaws.sqs#InvalidAttributeValue", "InvalidAttributeValue"}
	errReceiptHandleIsInvalid = errKind{400, "com.amazonaws.sqs#ReceiptHandleIsInvalid", "ReceiptHandleIsInvalid"}
	errMessageNotInflight     = errKind{400, "com.amazonaws.sqs#MessageNotInflight", "AWS.SimpleQueueService.MessageNotInflight"}
	errInvalidMessageContents = errKind{400, "com.amazonaws.sqs#InvalidMessageContents", "InvalidMessageContents"}
	errTooManyEntries         = errKind{400, "com.amazonaws.sqs#TooManyEntriesInBatchRequest", "AWS.SimpleQueueService.TooManyEntriesInBatchRequest"}
	errEmptyBatch             = errKind{400, "com.amazonaws.sqs#EmptyBatchRequest", "AWS.SimpleQueueService.EmptyBatchRequest"}
	errBatchIDsNotDistinct    = errKind{400, "com.amazonaws.sqs#BatchEntryIdsNotDistinct", "AWS.SimpleQueueService.BatchEntryIdsNotDistinct"}
	errBatchTooLong           = errKind{400, "com.amazonaws.sqs#BatchRequestTooLong", "AWS.SimpleQueueService.BatchRequestTooLong"}
	errInvalidBatchEntryID    = errKind{400, "com.amazonaws.sqs#InvalidBatchEntryId", "AWS.SimpleQueueService.InvalidBatchEntryId"}
	errPurgeInProgress        = errKind{403, "com.amazonaws.sqs#PurgeQueueInProgress", "AWS.SimpleQueueService.PurgeQueueInProgress"}
	errOverLimit              = errKind{403, "com.amazonaws.sqs#OverLimit", "OverLimit"}
	errUnsupportedOperation   = errKind{400, "com.amazonaws.sqs#UnsupportedOperation", "AWS.SimpleQueueService.UnsupportedOperation"}
	errResourceNotFound       = errKind{404, "com.amazonaws.sqs#ResourceNotFoundException", "ResourceNotFoundException"}
	errInternal               = errKind{500, "com.amazon.coral.service#InternalFailure", "InternalFailure"}
	errServiceUnavailable     = errKind{503, "com.amazon.coral.service#ServiceUnavailable", "ServiceUnavailable"}
)

// internal is a failure of Shoal's own (a storage error): Receiver.
func internal(err error) *apiError {
	e := errf(errInternal, "%v", err)
	e.receiver = true
	return e
}

func invalidParam(format string, args ...any) *apiError {
	return errf(errInvalidParameterValue, format, args...)
}

func missingParam(name string) *apiError {
	return errf(errMissingParameter, "The request must contain the parameter %s.", name)
}

var _ = http.StatusBadRequest
