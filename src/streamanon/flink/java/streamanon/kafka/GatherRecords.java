package streamanon.kafka;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.PrimitiveArrayTypeInfo;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.runtime.state.StateInitializationContext;
import org.apache.flink.runtime.state.StateSnapshotContext;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.BoundedOneInput;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.types.Row;

/**
 * The records of each Kafka partition, {@code Row(0, Row(partition, offset, value, timestamp))},
 * gathered in the JVM into batches that cross into Python as one element: a batch closes on
 * {@code batchSize} records or {@code batchMs} after its first record, before each checkpoint
 * barrier and at the end of the input. Out: {@code Row(key, Row(partition, offsets, sizes, data,
 * opened, timestamps))}, offsets and timestamps (the records' Kafka timestamps, ms: the reading
 * step's partition merge key) as little-endian int64, sizes as little-endian int32, data the
 * values joined by newlines (a value with a newline of its own is refused by the reading step,
 * which finds the values by their sizes; the common batch is then the block of lines the parser
 * reads, without a copy per value in Python), opened the wall-clock milliseconds at which this
 * step took the batch's first record (the job's "first record read" in its accounting);
 * {@code key} is the Python reading step's key (0: one task; the partition: one per partition).
 *
 * <p>It runs in the source's task, chained to it (forward, same parallelism: each reader gathers
 * the partitions it reads), so a record is handed over as a reference: keyed by partition in a
 * task of its own, every record was serialized, sent and read back, and its batch kept in keyed
 * state record by record. It keeps no record across a checkpoint (the open batches go out before
 * the barrier); its state is the next offset it takes per partition (a record below it, read again
 * by a restored job's source, is dropped here).
 *
 * <p>Behind the topic (catching up on a backlog: the open batch's newest record was written to
 * Kafka more than {@link #BEHIND_MS} ms before the batch is due, by its record timestamp), a due
 * batch stays open for another {@code batchMs}, up to {@link #MAX_OPEN_MS} ms after its first
 * record or {@code batchSize} records: latency is lost already, and large batches make the Python
 * steps after this one cheap per record. A live topic's fresh records keep the {@code batchMs}
 * limit.
 */
public class GatherRecords extends AbstractStreamOperator<Row>
        implements OneInputStreamOperator<Row, Row>, BoundedOneInput {
    private static final long serialVersionUID = 2L;

    /** a record older than this (its Kafka timestamp) when its batch is due: behind */
    public static final long BEHIND_MS = 500;
    /** ... and a batch behind closes this long after its first record at the latest */
    public static final long MAX_OPEN_MS = 1000;

    private final int batchSize;
    private final long batchMs;
    private final boolean keyByPartition;
    private transient Map<Integer, Batch> open;
    private transient Map<Integer, Long> next;
    private transient ListState<long[]> nextState;

    /** One partition's open batch. */
    private static final class Batch {
        long[] offsets = new long[1024];
        long[] stamps = new long[1024];
        int[] sizes = new int[1024];
        byte[] data = new byte[1 << 16];
        int count;
        int bytes;
        long opened;
        long newest = Long.MIN_VALUE;
        long deadline;

        void add(long offset, long stamp, byte[] value) {
            if (count == offsets.length) {
                offsets = Arrays.copyOf(offsets, 2 * count);
                stamps = Arrays.copyOf(stamps, 2 * count);
                sizes = Arrays.copyOf(sizes, 2 * count);
            }
            int need = bytes + value.length + (count > 0 ? 1 : 0);
            if (need > data.length) {
                data = Arrays.copyOf(data, Math.max(need, 2 * data.length));
            }
            if (count > 0) {
                data[bytes++] = '\n';
            }
            System.arraycopy(value, 0, data, bytes, value.length);
            bytes += value.length;
            offsets[count] = offset;
            stamps[count] = stamp;
            sizes[count] = value.length;
            newest = Math.max(newest, stamp);
            count++;
        }
    }

    public GatherRecords(int batchSize, long batchMs, boolean keyByPartition) {
        this.batchSize = Math.max(1, batchSize);
        this.batchMs = Math.max(0, batchMs);
        this.keyByPartition = keyByPartition;
    }

    @Override
    public void initializeState(StateInitializationContext context) throws Exception {
        super.initializeState(context);
        open = new HashMap<>();
        next = new HashMap<>();
        // a union list: after a restore at another parallelism every reader sees every
        // partition's offset (the source assigns the partitions anew)
        nextState = context.getOperatorStateStore().getUnionListState(
                new ListStateDescriptor<>("next-offsets",
                        PrimitiveArrayTypeInfo.LONG_PRIMITIVE_ARRAY_TYPE_INFO));
        for (long[] entry : nextState.get()) {
            next.merge((int) entry[0], entry[1], Math::max);
        }
    }

    @Override
    public void snapshotState(StateSnapshotContext context) throws Exception {
        super.snapshotState(context);
        List<long[]> entries = new ArrayList<>();
        for (Map.Entry<Integer, Long> e : next.entrySet()) {
            entries.add(new long[] {e.getKey(), e.getValue()});
        }
        nextState.update(entries);
    }

    @Override
    public void processElement(StreamRecord<Row> element) throws Exception {
        Row record = (Row) element.getValue().getField(1);
        int partition = (Integer) record.getField(0);
        long offset = (Long) record.getField(1);
        Long taken = next.get(partition);
        if (taken != null && offset < taken) {
            return; // taken before the checkpoint this run was restored from
        }
        next.put(partition, offset + 1);
        Batch batch = open.get(partition);
        if (batch == null) {
            batch = new Batch();
            long now = getProcessingTimeService().getCurrentProcessingTime();
            batch.opened = now;
            batch.deadline = now + batchMs;
            open.put(partition, batch);
            final Batch due = batch;
            getProcessingTimeService().registerTimer(batch.deadline,
                    time -> onTimer(partition, due, time));
        }
        batch.add(offset, (Long) record.getField(3), (byte[]) record.getField(2));
        if (batch.count >= batchSize) {
            flush(partition);
        }
    }

    private void onTimer(int partition, Batch batch, long time) {
        if (open.get(partition) != batch) {
            return; // closed by count (or a checkpoint) already
        }
        if (time - batch.newest > BEHIND_MS && time + batchMs - batch.opened <= MAX_OPEN_MS) {
            batch.deadline = time + Math.max(1, batchMs);
            getProcessingTimeService().registerTimer(batch.deadline,
                    later -> onTimer(partition, batch, later));
        } else {
            flush(partition);
        }
    }

    private void flush(int partition) {
        Batch b = open.remove(partition);
        if (b == null || b.count == 0) {
            return;
        }
        ByteBuffer offsets = ByteBuffer.allocate(8 * b.count).order(ByteOrder.LITTLE_ENDIAN);
        ByteBuffer sizes = ByteBuffer.allocate(4 * b.count).order(ByteOrder.LITTLE_ENDIAN);
        ByteBuffer stamps = ByteBuffer.allocate(8 * b.count).order(ByteOrder.LITTLE_ENDIAN);
        offsets.asLongBuffer().put(b.offsets, 0, b.count);
        stamps.asLongBuffer().put(b.stamps, 0, b.count);
        sizes.asIntBuffer().put(b.sizes, 0, b.count);
        output.collect(new StreamRecord<>(Row.of(keyByPartition ? partition : 0,
                Row.of(partition, offsets.array(), sizes.array(), Arrays.copyOf(b.data, b.bytes),
                        b.opened, stamps.array()))));
    }

    private void flushAll() {
        for (Integer partition : new ArrayList<>(open.keySet())) {
            flush(partition);
        }
    }

    @Override
    public void prepareSnapshotPreBarrier(long checkpointId) throws Exception {
        flushAll(); // no record is held across a checkpoint
        super.prepareSnapshotPreBarrier(checkpointId);
    }

    @Override
    public void processWatermark(Watermark mark) throws Exception {
        if (mark.getTimestamp() == Long.MAX_VALUE) {
            flushAll(); // the end of the input: every batch before the final watermark
        }
        super.processWatermark(mark);
    }

    @Override
    public void endInput() {
        flushAll();
    }

    @Override
    public void finish() throws Exception {
        flushAll();
        super.finish();
    }

    /** The type of the batches. */
    public static TypeInformation<Row> producedType() {
        return Types.ROW(Types.INT, Types.ROW(Types.INT, Types.PRIMITIVE_ARRAY(Types.BYTE),
                Types.PRIMITIVE_ARRAY(Types.BYTE), Types.PRIMITIVE_ARRAY(Types.BYTE),
                Types.LONG, Types.PRIMITIVE_ARRAY(Types.BYTE)));
    }
}
