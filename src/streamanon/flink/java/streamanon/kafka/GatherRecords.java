package streamanon.kafka;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.typeutils.ResultTypeQueryable;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;

/**
 * The records of one Kafka partition (the key), {@code Row(0, Row(partition, offset, value,
 * timestamp))}, gathered in the JVM into batches that cross into Python as one element: a batch
 * closes on {@code batchSize} records or {@code batchMs} after its first record, and at the end
 * of a bounded input (the final watermark). Out: {@code Row(key, Row(partition, offsets, sizes,
 * data, opened, timestamps))}, offsets and timestamps (the records' Kafka timestamps, ms: the
 * reading step's partition merge key) as little-endian int64, sizes as little-endian int32, data
 * the values one after another, opened the wall-clock milliseconds at which this step took the
 * batch's first record (the job's "first record read" in its accounting); {@code key} is the
 * Python reading step's key (0: one task; the partition: one per partition).
 *
 * <p>Behind the topic (catching up on a backlog: the open batch's newest record was written to
 * Kafka more than {@link #BEHIND_MS} ms before the timer fires, by its record timestamp), a due
 * batch stays open for another {@code batchMs}, up to {@link #MAX_OPEN_MS} ms after its first
 * record or {@code batchSize} records: latency is lost already, and large batches make the
 * Python steps after this one cheap per record. A live topic's fresh records keep the
 * {@code batchMs} limit.
 *
 * <p>State (per partition, checkpointed): the records of the open batch, the next offset this
 * step takes (a record below it, read again after a restore, is dropped) and the open batch's
 * deadline (a timer of a batch already closed by count is ignored).
 */
public class GatherRecords extends KeyedProcessFunction<Integer, Row, Row>
        implements ResultTypeQueryable<Row> {
    private static final long serialVersionUID = 1L;
    /** the final watermark fires an event-time timer at this time: the end of the input */
    public static final long END_OF_INPUT = Long.MAX_VALUE - 1;

    /** a record older than this (its Kafka timestamp) when its batch is due: behind */
    public static final long BEHIND_MS = 500;
    /** ... and a batch behind closes this long after its first record at the latest */
    public static final long MAX_OPEN_MS = 1000;

    private final int batchSize;
    private final long batchMs;
    private final boolean keyByPartition;
    private transient ListState<Row> pending;
    private transient ValueState<Long> next;
    private transient ValueState<Long> deadline;
    private transient ValueState<Integer> count;
    private transient ValueState<Long> opened;
    private transient ValueState<Long> newest;

    public GatherRecords(int batchSize, long batchMs, boolean keyByPartition) {
        this.batchSize = Math.max(1, batchSize);
        this.batchMs = Math.max(0, batchMs);
        this.keyByPartition = keyByPartition;
    }

    @Override
    public void open(OpenContext openContext) {
        pending = getRuntimeContext().getListState(new ListStateDescriptor<>("pending",
                Types.ROW(Types.INT, Types.LONG, Types.PRIMITIVE_ARRAY(Types.BYTE),
                        Types.LONG)));
        next = getRuntimeContext().getState(new ValueStateDescriptor<>("next", Types.LONG));
        deadline = getRuntimeContext().getState(new ValueStateDescriptor<>("deadline", Types.LONG));
        count = getRuntimeContext().getState(new ValueStateDescriptor<>("count", Types.INT));
        opened = getRuntimeContext().getState(new ValueStateDescriptor<>("opened", Types.LONG));
        newest = getRuntimeContext().getState(new ValueStateDescriptor<>("newest", Types.LONG));
    }

    @Override
    public void processElement(Row tagged, Context ctx, Collector<Row> out) throws Exception {
        Row record = (Row) tagged.getField(1);
        long offset = (Long) record.getField(1);
        Long taken = next.value();
        if (taken != null && offset < taken) {
            return; // taken before the checkpoint this run was restored from
        }
        next.update(offset + 1);
        pending.add(record);
        Integer n = count.value();
        int size = n == null ? 1 : n + 1;
        if (size == 1) {
            opened.update(ctx.timerService().currentProcessingTime());
        }
        if (size >= batchSize) {
            flush(ctx.getCurrentKey(), out);
            return;
        }
        count.update(size);
        Long stamp = ctx.timestamp();
        if (stamp != null) {
            Long seen = newest.value();
            newest.update(seen == null ? stamp : Math.max(seen, stamp));
        }
        if (size == 1) {
            long now = ctx.timerService().currentProcessingTime();
            long due = now + batchMs;
            deadline.update(due);
            ctx.timerService().registerProcessingTimeTimer(due);
            ctx.timerService().registerEventTimeTimer(END_OF_INPUT);
        }
    }

    @Override
    public void onTimer(long timestamp, OnTimerContext ctx, Collector<Row> out) throws Exception {
        Long due = deadline.value();
        if (timestamp == END_OF_INPUT) {
            flush(ctx.getCurrentKey(), out);
        } else if (due != null && timestamp >= due) {
            Long stamp = newest.value();
            Long first = opened.value();
            if (stamp != null && first != null && timestamp - stamp > BEHIND_MS
                    && timestamp + batchMs - first <= MAX_OPEN_MS) {
                long later = timestamp + Math.max(1, batchMs);
                deadline.update(later);
                ctx.timerService().registerProcessingTimeTimer(later);
            } else {
                flush(ctx.getCurrentKey(), out);
            }
        }
    }

    private void flush(Integer partition, Collector<Row> out) throws Exception {
        List<Row> items = new ArrayList<>();
        for (Row r : pending.get()) {
            items.add(r);
        }
        Long first = opened.value();
        pending.clear();
        count.clear();
        deadline.clear();
        opened.clear();
        newest.clear();
        if (items.isEmpty()) {
            return;
        }
        ByteBuffer offsets = ByteBuffer.allocate(8 * items.size()).order(ByteOrder.LITTLE_ENDIAN);
        ByteBuffer sizes = ByteBuffer.allocate(4 * items.size()).order(ByteOrder.LITTLE_ENDIAN);
        ByteBuffer stamps = ByteBuffer.allocate(8 * items.size()).order(ByteOrder.LITTLE_ENDIAN);
        int total = 0;
        for (Row r : items) {
            total += ((byte[]) r.getField(2)).length;
        }
        ByteArrayOutputStream data = new ByteArrayOutputStream(total);
        for (Row r : items) {
            byte[] value = (byte[]) r.getField(2);
            offsets.putLong((Long) r.getField(1));
            sizes.putInt(value.length);
            stamps.putLong((Long) r.getField(3));
            data.write(value, 0, value.length);
        }
        out.collect(Row.of(keyByPartition ? partition : 0, Row.of(partition, offsets.array(),
                sizes.array(), data.toByteArray(), first == null ? 0L : first,
                stamps.array())));
    }

    @Override
    public TypeInformation<Row> getProducedType() {
        return Types.ROW(Types.INT, Types.ROW(Types.INT, Types.PRIMITIVE_ARRAY(Types.BYTE),
                Types.PRIMITIVE_ARRAY(Types.BYTE), Types.PRIMITIVE_ARRAY(Types.BYTE),
                Types.LONG, Types.PRIMITIVE_ARRAY(Types.BYTE)));
    }
}
