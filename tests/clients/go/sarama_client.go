// sarama_client runs a list of operations against a Kafka broker with Sarama, the client
// as Debian ships it (golang-github-shopify-sarama-dev), and prints what each returned.
//
// stdin: {"bootstrap": "host:port", "version": "2.1.0", "ops": [{"op": "produce", ...}, ...]}
// stdout: one JSON value per op, in a list: {"result": ...} or {"error": "..."}.
// The tests in tests/clients/test_sarama.py say what each op takes. No consumer group is
// used: partitions are consumed by number, from an offset.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/Shopify/sarama"
)

type record struct {
	Key       *string     `json:"key"`
	Value     *string     `json:"value"`
	Headers   [][2]string `json:"headers"`
	Timestamp int64       `json:"timestamp"`
	Offset    int64       `json:"offset"`
	Partition int32       `json:"partition"`
}

type op struct {
	Op          string             `json:"op"`
	Topic       string             `json:"topic"`
	Partition   int32              `json:"partition"`
	Partitions  int32              `json:"partitions"`
	Config      map[string]*string `json:"config"`
	Records     []record           `json:"records"`
	Compression string             `json:"compression"`
	Acks        int16              `json:"acks"`
	Offset      int64              `json:"offset"`
	Count       int                `json:"count"`
	Timestamp   int64              `json:"timestamp"`
}

type request struct {
	Bootstrap string `json:"bootstrap"`
	Version   string `json:"version"`
	Ops       []op   `json:"ops"`
}

type outcome struct {
	Result interface{} `json:"result,omitempty"`
	Error  string      `json:"error,omitempty"`
}

var codecs = map[string]sarama.CompressionCodec{
	"none": sarama.CompressionNone, "gzip": sarama.CompressionGZIP, "snappy": sarama.CompressionSnappy,
	"lz4": sarama.CompressionLZ4, "zstd": sarama.CompressionZSTD,
}

func bytesOf(s *string) []byte {
	if s == nil {
		return nil
	}
	return []byte(*s)
}

func stringOf(b []byte) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}

func config(version sarama.KafkaVersion) *sarama.Config {
	c := sarama.NewConfig()
	c.Version = version
	c.ClientID = "seglog-tests-sarama"
	c.Metadata.Retry.Max = 0
	c.Admin.Timeout = 10 * time.Second
	c.Producer.Return.Successes = true
	c.Producer.Partitioner = sarama.NewManualPartitioner
	c.Producer.Retry.Max = 0
	c.Producer.Flush.Messages = 1000 // one batch per partition: the codec sees every record
	c.Producer.Flush.Frequency = 50 * time.Millisecond
	c.Consumer.MaxWaitTime = 100 * time.Millisecond
	c.Consumer.Return.Errors = true
	return c
}

func produce(addrs []string, version sarama.KafkaVersion, o op) (interface{}, error) {
	c := config(version)
	codec, ok := codecs[o.Compression]
	if !ok {
		return nil, fmt.Errorf("unknown compression %q", o.Compression)
	}
	c.Producer.Compression = codec
	c.Producer.RequiredAcks = sarama.RequiredAcks(o.Acks)
	producer, err := sarama.NewSyncProducer(addrs, c)
	if err != nil {
		return nil, err
	}
	defer producer.Close()
	messages := make([]*sarama.ProducerMessage, len(o.Records))
	for i, r := range o.Records {
		m := &sarama.ProducerMessage{Topic: o.Topic, Partition: o.Partition, Timestamp: time.Unix(0, r.Timestamp*int64(time.Millisecond))}
		if r.Key != nil {
			m.Key = sarama.ByteEncoder(bytesOf(r.Key))
		}
		if r.Value != nil {
			m.Value = sarama.ByteEncoder(bytesOf(r.Value))
		}
		for _, h := range r.Headers {
			m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(h[0]), Value: []byte(h[1])})
		}
		messages[i] = m
	}
	if err := producer.SendMessages(messages); err != nil {
		if errs, ok := err.(sarama.ProducerErrors); ok && len(errs) > 0 {
			return nil, errs[0].Err
		}
		return nil, err
	}
	offsets := make([]int64, len(messages))
	for i, m := range messages {
		offsets[i] = m.Offset
	}
	return offsets, nil
}

func consume(client sarama.Client, o op) (interface{}, error) {
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		return nil, err
	}
	defer consumer.Close()
	pc, err := consumer.ConsumePartition(o.Topic, o.Partition, o.Offset)
	if err != nil {
		return nil, err
	}
	defer pc.Close()
	got := []record{}
	deadline := time.After(20 * time.Second)
	for len(got) < o.Count {
		select {
		case m := <-pc.Messages():
			r := record{Key: stringOf(m.Key), Value: stringOf(m.Value), Offset: m.Offset, Partition: m.Partition,
				Timestamp: m.Timestamp.UnixNano() / int64(time.Millisecond), Headers: [][2]string{}}
			for _, h := range m.Headers {
				r.Headers = append(r.Headers, [2]string{string(h.Key), string(h.Value)})
			}
			got = append(got, r)
		case e := <-pc.Errors():
			return nil, e.Err
		case <-deadline:
			return nil, fmt.Errorf("%d of %d records after 20 s", len(got), o.Count)
		}
	}
	return got, nil
}

func describeConfig(admin sarama.ClusterAdmin, o op) (interface{}, error) {
	entries, err := admin.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: o.Topic})
	if err != nil {
		return nil, err
	}
	found := map[string]interface{}{}
	for _, e := range entries {
		found[e.Name] = map[string]interface{}{"value": e.Value, "default": e.Default, "read_only": e.ReadOnly}
	}
	return found, nil
}

func listTopics(admin sarama.ClusterAdmin) (interface{}, error) {
	topics, err := admin.ListTopics()
	if err != nil {
		return nil, err
	}
	found := map[string]interface{}{}
	for name, d := range topics {
		configs := map[string]string{}
		for k, v := range d.ConfigEntries {
			if v != nil {
				configs[k] = *v
			}
		}
		found[name] = map[string]interface{}{"partitions": d.NumPartitions, "replication_factor": d.ReplicationFactor, "config": configs}
	}
	return found, nil
}

var adminOps = map[string]bool{"create_topic": true, "delete_topic": true, "create_partitions": true,
	"delete_records": true, "alter_config": true, "describe_config": true, "list_topics": true, "describe_cluster": true}

func run(addrs []string, version sarama.KafkaVersion, client sarama.Client, admin sarama.ClusterAdmin, o op) (interface{}, error) {
	if admin == nil && adminOps[o.Op] {
		return nil, fmt.Errorf("no admin client at Kafka %s", version)
	}
	switch o.Op {
	case "create_topic":
		return nil, admin.CreateTopic(o.Topic, &sarama.TopicDetail{NumPartitions: o.Partitions, ReplicationFactor: 1, ConfigEntries: o.Config}, false)
	case "delete_topic":
		return nil, admin.DeleteTopic(o.Topic)
	case "create_partitions":
		return nil, admin.CreatePartitions(o.Topic, o.Partitions, nil, false)
	case "delete_records":
		return nil, admin.DeleteRecords(o.Topic, map[int32]int64{o.Partition: o.Offset})
	case "alter_config":
		return nil, admin.AlterConfig(sarama.TopicResource, o.Topic, o.Config, false)
	case "describe_config":
		return describeConfig(admin, o)
	case "list_topics":
		return listTopics(admin)
	case "describe_cluster":
		brokers, controller, err := admin.DescribeCluster()
		if err != nil {
			return nil, err
		}
		addrs := []string{}
		for _, b := range brokers {
			addrs = append(addrs, fmt.Sprintf("%d@%s", b.ID(), b.Addr()))
		}
		return map[string]interface{}{"brokers": addrs, "controller": controller}, nil
	case "produce":
		return produce(addrs, version, o)
	case "consume":
		return consume(client, o)
	case "offset": // ListOffsets: -2 earliest, -1 latest, else a timestamp
		if err := client.RefreshMetadata(o.Topic); err != nil {
			return nil, err
		}
		return client.GetOffset(o.Topic, o.Partition, o.Timestamp)
	case "partitions":
		if err := client.RefreshMetadata(o.Topic); err != nil {
			return nil, err
		}
		return client.Partitions(o.Topic)
	}
	return nil, fmt.Errorf("unknown op %q", o.Op)
}

func main() {
	var req request
	if err := json.NewDecoder(os.Stdin).Decode(&req); err != nil {
		fmt.Fprintln(os.Stderr, "bad request:", err)
		os.Exit(2)
	}
	version, err := sarama.ParseKafkaVersion(req.Version)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	addrs := []string{req.Bootstrap}
	client, err := sarama.NewClient(addrs, config(version))
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		os.Exit(1)
	}
	defer client.Close()
	// Sarama's admin finds the controller, which Metadata names from v1 (Kafka 0.10) on: an older
	// version's program has none, and its admin ops fail
	var admin sarama.ClusterAdmin
	if version.IsAtLeast(sarama.V0_10_0_0) {
		admin, err = sarama.NewClusterAdmin(addrs, config(version))
		if err != nil {
			fmt.Fprintln(os.Stderr, "admin:", err)
			os.Exit(1)
		}
		defer admin.Close()
	}
	results := make([]outcome, len(req.Ops))
	for i, o := range req.Ops {
		result, err := run(addrs, version, client, admin, o)
		if err != nil {
			results[i] = outcome{Error: err.Error()}
		} else {
			results[i] = outcome{Result: result}
		}
	}
	if err := json.NewEncoder(os.Stdout).Encode(results); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
