// kafkajs_client runs a list of operations against a Kafka broker with kafkajs and prints
// what each returned: the same operations, on stdin and stdout, as tests/clients/go/sarama_client.go.
//
// stdin: {"bootstrap": "host:port", "ops": [{"op": "produce", ...}, ...]}, with "ca" (a PEM file: TLS) and
// "sasl" ({"mechanism": "scram-sha-512", "username": ..., "password": ...}) for a secured listener
// stdout: a JSON list, one {"result": ...} or {"error": "..."} per op.
//
// kafkajs consumes only through a consumer group, which these tests leave alone, so "fetch"
// sends Fetch requests through the client's own broker connection (its internal Cluster, the
// path its consumer takes) and decodes the answer with its own decoder.
'use strict'

const { Kafka, CompressionTypes, CompressionCodecs, ConfigResourceTypes, logLevel } = require('kafkajs')
const SnappyCodec = require('kafkajs-snappy')

CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec

const CODECS = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP, snappy: CompressionTypes.Snappy }

const text = buffer => (buffer === null || buffer === undefined ? null : buffer.toString())

function headersOf(pairs) {
  const headers = {}
  for (const [key, value] of pairs || []) {
    if (key in headers) headers[key] = [].concat(headers[key], value)
    else headers[key] = value
  }
  return headers
}

function recordOf(message) {
  const headers = []
  for (const [key, value] of Object.entries(message.headers || {})) {
    for (const one of [].concat(value)) headers.push([key, text(one)])
  }
  return {
    offset: Number(message.offset),
    key: text(message.key),
    value: text(message.value),
    timestamp: Number(message.timestamp),
    headers,
  }
}

// The cluster object kafkajs builds for its producer and consumer: not exported, reached by its symbol.
function clusterOf(kafka) {
  const create = Object.getOwnPropertySymbols(kafka).find(s => s.description === 'private:Kafka:createCluster')
  return kafka[create]({})
}

async function fetchRecords(cluster, { topic, partition, offset, count }) {
  await cluster.addTargetTopic(topic)
  const leader = cluster.findTopicPartitionMetadata(topic).find(p => p.partitionId === partition).leader
  const broker = await cluster.findBroker({ nodeId: leader })
  const got = []
  let next = offset
  const deadline = Date.now() + 20000
  while (got.length < count) {
    if (Date.now() > deadline) throw new Error(`${got.length} of ${count} records after 20 s`)
    const response = await broker.fetch({
      replicaId: -1,
      isolationLevel: 1,
      maxWaitTime: 100,
      minBytes: 1,
      maxBytes: 1 << 20,
      topics: [{ topic, partitions: [{ partition, fetchOffset: String(next), maxBytes: 1 << 20 }] }],
    })
    const part = response.responses[0].partitions[0]
    if (part.errorCode !== 0) throw new Error(`fetch error ${part.errorCode}`)
    // a compressed batch comes whole: records before the one asked for are dropped, as the consumer does
    for (const message of part.messages) {
      if (Number(message.offset) >= next && got.length < count) got.push(recordOf(message))
    }
    if (got.length) next = got[got.length - 1].offset + 1
  }
  return got
}

async function produce(kafka, { topic, partition, compression, acks, records }) {
  if (!(compression in CODECS)) throw new Error(`kafkajs has no ${compression} codec here`)
  const producer = kafka.producer({ allowAutoTopicCreation: false })
  await producer.connect()
  try {
    const answer = await producer.send({
      topic,
      acks,
      compression: CODECS[compression],
      messages: records.map(r => ({
        partition,
        key: r.key,
        value: r.value,
        headers: headersOf(r.headers),
        timestamp: String(r.timestamp),
      })),
    })
    return answer.map(a => ({ partition: a.partition, error_code: a.errorCode, base_offset: Number(a.baseOffset) }))
  } finally {
    await producer.disconnect()
  }
}

async function run(kafka, admin, cluster, op) {
  const topicResource = [{ type: ConfigResourceTypes.TOPIC, name: op.topic }]
  switch (op.op) {
    case 'create_topic': {
      const configEntries = Object.entries(op.config || {}).map(([name, value]) => ({ name, value }))
      return admin.createTopics({
        topics: [{ topic: op.topic, numPartitions: op.partitions, replicationFactor: 1, configEntries }],
        waitForLeaders: true,
      })
    }
    case 'delete_topic':
      return admin.deleteTopics({ topics: [op.topic] })
    case 'list_topics':
      return (await admin.listTopics()).sort()
    case 'metadata': {
      const { topics } = await admin.fetchTopicMetadata({ topics: [op.topic] })
      return topics[0].partitions.map(p => ({ partition: p.partitionId, leader: p.leader, replicas: p.replicas, isr: p.isr }))
    }
    case 'describe_cluster':
      return admin.describeCluster()
    case 'create_partitions':
      return admin.createPartitions({ topicPartitions: [{ topic: op.topic, count: op.partitions }] })
    case 'delete_records':
      return admin.deleteTopicRecords({ topic: op.topic, partitions: [{ partition: op.partition, offset: String(op.offset) }] })
    case 'describe_config': {
      const { resources } = await admin.describeConfigs({ resources: topicResource, includeSynonyms: false })
      if (resources[0].errorCode !== 0) throw new Error(`describe configs error ${resources[0].errorCode}`)
      const found = {}
      for (const e of resources[0].configEntries) found[e.configName] = { value: e.configValue, default: e.isDefault, read_only: e.readOnly }
      return found
    }
    case 'alter_config': {
      const configEntries = Object.entries(op.config).map(([name, value]) => ({ name, value }))
      const { resources } = await admin.alterConfigs({ resources: [{ ...topicResource[0], configEntries }] })
      return resources.map(r => r.errorCode)
    }
    case 'offsets':
      return (await admin.fetchTopicOffsets(op.topic)).map(o => ({ partition: o.partition, low: Number(o.low), high: Number(o.high) }))
    case 'offsets_for_time':
      return (await admin.fetchTopicOffsetsByTimestamp(op.topic, op.timestamp)).map(o => ({ partition: o.partition, offset: Number(o.offset) }))
    case 'produce':
      return produce(kafka, op)
    case 'fetch':
      return fetchRecords(cluster, op)
  }
  throw new Error(`unknown op ${op.op}`)
}

async function main() {
  const chunks = []
  for await (const chunk of process.stdin) chunks.push(chunk)
  const request = JSON.parse(Buffer.concat(chunks).toString())
  const kafka = new Kafka({
    clientId: 'seglog-tests-kafkajs',
    brokers: [request.bootstrap],
    logLevel: logLevel.NOTHING,
    retry: { retries: 0 },
    ssl: request.ca ? { ca: [require('fs').readFileSync(request.ca, 'utf-8')] } : undefined,
    sasl: request.sasl,
  })
  const admin = kafka.admin()
  const cluster = clusterOf(kafka)
  await admin.connect()
  await cluster.connect()
  const results = []
  try {
    for (const op of request.ops) {
      try {
        results.push({ result: (await run(kafka, admin, cluster, op)) ?? null })
      } catch (e) {
        results.push({ error: `${e.name}: ${e.message}` })
      }
    }
  } finally {
    await admin.disconnect()
    await cluster.disconnect()
  }
  process.stdout.write(JSON.stringify(results) + '\n')
}

main().catch(e => {
  process.stderr.write(`${e.stack}\n`)
  process.exit(1)
})
