// Package configs is the vocabulary of Kafka-named configs: a config's
// definition (Def: name, the broker config that gives its default, type,
// Kafka's default, documentation, validation) with the validators the
// tables use (IntRange, OneOf, IsBool), a described config (Entry with its
// Synonyms, most specific first, as DescribeConfigs and CreateTopics
// report them) and the LIST value operations of IncrementalAlterConfigs
// (SplitList, AppendList, SubtractList).
//
// It is not broker.Config, the process's start-up settings (flags,
// SHOAL_* variables, the properties file): configs are what Kafka's
// DescribeConfigs and AlterConfigs speak. The tables themselves (topic
// configs, broker configs, group configs) and their resolution still live
// in the root package; they move here as their owners become packages
// and export their own tables (broker/doc.go has the plan).
//
// It owns no state and takes no locks. It imports nothing of Shoal's.
package configs
