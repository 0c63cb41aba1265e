// A consumer of gridbus written against docs/asyncapi.yaml alone, in another language than the
// pool's: it finds a schedd with getObjects, submits a cluster with Submit (both in JSON, which
// every agent accepts and answers in kind), and follows the cluster's job events on a durable
// queue of its own bound to gridbus.events, dropping a repeated EventId (the message_id).
//
// Driven by tests/node/test_node_consumer.py: settings in the environment, one JSON line per step
// on stdout; on stdin, "away" closes its connection (its queue keeps the events meanwhile),
// "back" connects again, "report" tells what it has seen so far. A connection the broker drops
// is connected again too.
//
//   GRIDBUS_URL   amqp://user:password@host:port/vhost
//   JOBS          procs to submit (default 3)
//   JOB_CMD, JOB_ARGS, JOB_IWD, JOB_LOG   the job's Cmd, Arguments, Iwd and UserLog
//   QUEUE         the durable queue's name

import { randomUUID } from "node:crypto";
import { createInterface } from "node:readline";
import { decode, ExtensionCodec } from "@msgpack/msgpack";
import amqp from "amqplib";

const url = process.env.GRIDBUS_URL;
const jobs = Number.parseInt(process.env.JOBS || "3", 10);
const queue = process.env.QUEUE || `node-consumer-${randomUUID()}`;
const user = decodeURIComponent(new URL(url).username || "guest");

const say = (step, fields = {}) => process.stdout.write(`${JSON.stringify({ step, ...fields })}\n`);

// msgpack's typed ClassAd values (gridbus/wire.py): decoded to their JSON form.
const codec = new ExtensionCodec();
codec.register({ type: 1, encode: () => null, decode: (data) => ({ $expr: new TextDecoder().decode(data) }) });
codec.register({ type: 2, encode: () => null, decode: () => ({ $undefined: true }) });
codec.register({ type: 3, encode: () => null, decode: () => ({ $error: true }) });

function body(msg) {
  const type = msg.properties.contentType || "application/msgpack";
  if (type.startsWith("application/json")) return JSON.parse(msg.content.toString("utf8"));
  return decode(msg.content, { extensionCodec: codec, useBigInt64: false });
}

// One call and its answer (several messages when partial), over direct reply-to.
async function call(channel, routingKey, payload, type) {
  const correlationId = randomUUID();
  const parts = [];
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${routingKey} did not answer ${type}`)), 30000);
    channel
      .consume(
        "amq.rabbitmq.reply-to",
        (msg) => {
          if (msg.properties.correlationId !== correlationId) return;
          const answer = body(msg);
          parts.push(answer);
          if (!answer.partial) {
            clearTimeout(timer);
            channel.cancel(msg.fields.consumerTag).then(() => resolve({ answer, parts, raw: msg }));
          }
        },
        { noAck: true },
      )
      .then(() =>
        channel.publish("gridbus.rpc", routingKey, Buffer.from(JSON.stringify(payload)), {
          contentType: "application/json",
          type,
          correlationId,
          replyTo: "amq.rabbitmq.reply-to",
          userId: user,
        }),
      )
      .catch(reject);
  });
}

const seen = new Set(); // EventIds
let duplicates = 0;
let messages = 0;
const perProc = new Map(); // proc -> [event names]
let cluster = null;
let connection = null;
let away = false;

function done() {
  return perProc.size === jobs && [...perProc.values()].every((names) => names.includes("terminated"));
}

function take(msg) {
  messages += 1;
  const id = msg.properties.messageId;
  const event = body(msg);
  if (id !== event.EventId) say("error", { text: `message_id ${id} is not the EventId ${event.EventId}` });
  if (seen.has(id)) {
    duplicates += 1;
    return;
  }
  seen.add(id);
  // The batched form holds the bodies of several events of one routing key.
  for (const one of event.Events || [event]) {
    if (one.ClusterId !== cluster) continue;
    for (const proc of one.ProcIds || [one.ProcId]) {
      if (!perProc.has(proc)) perProc.set(proc, []);
      perProc.get(proc).push(event.event);
    }
    say("event", { event: event.event, id, procs: one.ProcIds || [one.ProcId], persistent: msg.properties.deliveryMode === 2 });
  }
}

async function follow() {
  // Connect (again) and consume the queue until "away", a dropped connection, or the end.
  for (;;) {
    try {
      connection = await amqp.connect(url);
      break;
    } catch (err) {
      say("retry", { text: String(err) });
      await new Promise((r) => setTimeout(r, 500));
    }
  }
  const channel = await connection.createChannel();
  await channel.prefetch(50);
  connection.on("error", () => {});
  connection.on("close", () => {
    connection = null;
    if (!away && !done()) {
      say("dropped");
      follow();
    }
  });
  await channel.consume(queue, (msg) => {
    take(msg);
    channel.ack(msg);
    if (done()) finish();
  });
  say("following", { queue });
}

function report(step) {
  say(step, { events: Object.fromEntries(perProc), duplicates, messages, unique: seen.size });
}

async function finish() {
  report("done");
  const c = connection;
  connection = null;
  away = true;
  if (c) await c.close().catch(() => {});
  process.exit(0);
}

async function main() {
  connection = await amqp.connect(url);
  const channel = await connection.createChannel();
  // The queue first, so that no event of the cluster is published before it is bound.
  await channel.assertQueue(queue, { durable: true });
  await channel.bindQueue(queue, "gridbus.events", `job.*.${user.replaceAll(".", "_")}`);

  const found = await call(channel, "class.scheduler", { class: "scheduler", filters: {} }, "query_request");
  say("getObjects", { reply: found.answer, contentType: found.raw.properties.contentType });
  const schedd = found.answer.out.objects[0].agent;

  const ad = {
    Cmd: process.env.JOB_CMD || "/bin/true",
    Arguments: process.env.JOB_ARGS || "",
    Iwd: process.env.JOB_IWD || "/tmp",
    JobUniverse: 5,
    Requirements: { $expr: "true" },
    RequestCpus: 1,
    RequestMemory: 16,
    RequestDisk: 64,
  };
  if (process.env.JOB_LOG) ad.UserLog = process.env.JOB_LOG;
  const submitted = await call(channel, schedd, { object: schedd, method: "Submit", args: { Ad: ad, Count: jobs } }, "method_request");
  say("submit", { reply: submitted.answer, contentType: submitted.raw.properties.contentType });
  if (submitted.answer.status !== 0) process.exit(1);
  cluster = submitted.answer.out.ClusterId;
  await connection.close();
  connection = null;
  await follow();

  createInterface({ input: process.stdin }).on("line", async (line) => {
    if (line.trim() === "away" && connection) {
      away = true;
      const c = connection;
      connection = null;
      await c.close().catch(() => {});
      say("away");
    } else if (line.trim() === "report") {
      report("report");
    } else if (line.trim() === "back") {
      away = false;
      await follow();
    }
  });
}

main().catch((err) => {
  say("error", { text: String(err && err.stack ? err.stack : err) });
  process.exit(1);
});
