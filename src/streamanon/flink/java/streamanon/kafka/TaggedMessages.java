package streamanon.kafka;

import java.util.Arrays;
import org.apache.flink.api.common.functions.FlatMapFunction;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.typeutils.ResultTypeQueryable;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;

/**
 * A batch of output messages for one topic partition, {@code Row(topic, partition, tags, text)}
 * (tags and text: UTF-8 bytes, one line per message, each ending in a newline), split into one
 * {@code Row(topic, partition, tag, value)} per message in the JVM, so a batch crosses from
 * Python once. Bytes, not strings: a string costs a conversion from Python, a character-wise
 * encoding between tasks and an encoding per message here, and the sink wants bytes.
 */
public class TaggedMessages implements FlatMapFunction<Row, Row>, ResultTypeQueryable<Row> {
    private static final long serialVersionUID = 1L;

    @Override
    public void flatMap(Row batch, Collector<Row> out) {
        String topic = (String) batch.getField(0);
        Integer partition = (Integer) batch.getField(1);
        byte[] tags = (byte[]) batch.getField(2);
        byte[] text = (byte[]) batch.getField(3);
        int t = 0;
        int v = 0;
        while (v < text.length) {
            int tEnd = next(tags, t);
            int vEnd = next(text, v);
            if (tEnd < 0 || vEnd < 0) {
                throw new IllegalStateException("tags and messages do not pair up in a batch for "
                        + topic + "[" + partition + "]");
            }
            out.collect(Row.of(topic, partition, Arrays.copyOfRange(tags, t, tEnd),
                    Arrays.copyOfRange(text, v, vEnd)));
            t = tEnd + 1;
            v = vEnd + 1;
        }
        if (t != tags.length) {
            throw new IllegalStateException("more tags than messages in a batch for " + topic);
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
