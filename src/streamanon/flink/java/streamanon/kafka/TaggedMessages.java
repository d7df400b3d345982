package streamanon.kafka;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import org.apache.flink.api.common.functions.FlatMapFunction;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.typeutils.ResultTypeQueryable;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;

/**
 * A batch of output messages for one topic partition, {@code Row(topic, partition, codes,
 * text)}, split into one {@code Row(topic, partition, tag, value)} per message in the JVM, so a
 * batch crosses from Python once. {@code codes}: each message's input position,
 * {@code offset << 16 | partition}, as little-endian int64; {@code text}: UTF-8, one line per
 * message, each ending in a newline. The tag, {@code PARTITION@OFFSET} in ASCII, is written
 * here: in Python it cost a string per message under the interpreter lock. Bytes, not
 * strings: a string costs a conversion from Python, a character-wise encoding between tasks
 * and an encoding per message here, and the sink wants bytes.
 */
public class TaggedMessages implements FlatMapFunction<Row, Row>, ResultTypeQueryable<Row> {
    private static final long serialVersionUID = 1L;

    @Override
    public void flatMap(Row batch, Collector<Row> out) {
        String topic = (String) batch.getField(0);
        Integer partition = (Integer) batch.getField(1);
        ByteBuffer codes = ByteBuffer.wrap((byte[]) batch.getField(2))
                .order(ByteOrder.LITTLE_ENDIAN);
        byte[] text = (byte[]) batch.getField(3);
        int v = 0;
        while (v < text.length) {
            int vEnd = next(text, v);
            if (vEnd < 0 || codes.remaining() < 8) {
                throw new IllegalStateException("positions and messages do not pair up in a "
                        + "batch for " + topic + "[" + partition + "]");
            }
            long code = codes.getLong();
            byte[] tag = ((code & 0xFFFF) + "@" + (code >>> 16))
                    .getBytes(StandardCharsets.US_ASCII);
            out.collect(Row.of(topic, partition, tag, Arrays.copyOfRange(text, v, vEnd)));
            v = vEnd + 1;
        }
        if (codes.remaining() != 0) {
            throw new IllegalStateException("more positions than messages in a batch for "
                    + topic);
        }
    }

    /** The index of the next newline at or after {@code from} (UTF-8: never inside a character). */
    private static int next(byte[] data, int from) {
        for (int i = from; i < data.length; i++) {
            if (data[i] == '\n') {
                return i;
            }
        }
        return -1;
    }

    @Override
    public TypeInformation<Row> getProducedType() {
        return Types.ROW(Types.STRING, Types.INT, Types.PRIMITIVE_ARRAY(Types.BYTE),
                Types.PRIMITIVE_ARRAY(Types.BYTE));
    }
}
