package streamanon.kafka;

import java.nio.charset.StandardCharsets;
import org.apache.flink.api.common.functions.FlatMapFunction;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.typeutils.ResultTypeQueryable;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;

/**
 * A batch of output messages for one topic partition, {@code Row(topic, partition, tags, text)}
 * (tags and text: one line per message, each ending in a newline), split into one
 * {@code Row(topic, partition, tag, value)} per message in the JVM, so a batch crosses from
 * Python once.
 */
public class TaggedMessages implements FlatMapFunction<Row, Row>, ResultTypeQueryable<Row> {
    private static final long serialVersionUID = 1L;

    @Override
    public void flatMap(Row batch, Collector<Row> out) {
        String topic = (String) batch.getField(0);
        Integer partition = (Integer) batch.getField(1);
        String tags = (String) batch.getField(2);
        String text = (String) batch.getField(3);
        int t = 0;
        int v = 0;
        while (v < text.length()) {
            int tEnd = tags.indexOf('\n', t);
            int vEnd = text.indexOf('\n', v);
            if (tEnd < 0 || vEnd < 0) {
                throw new IllegalStateException("tags and messages do not pair up in a batch for "
                        + topic + "[" + partition + "]");
            }
            out.collect(Row.of(topic, partition, tags.substring(t, tEnd),
                    text.substring(v, vEnd).getBytes(StandardCharsets.UTF_8)));
            t = tEnd + 1;
            v = vEnd + 1;
        }
        if (t != tags.length()) {
            throw new IllegalStateException("more tags than messages in a batch for " + topic);
        }
    }

    @Override
    public TypeInformation<Row> getProducedType() {
        return Types.ROW(Types.STRING, Types.INT, Types.STRING, Types.PRIMITIVE_ARRAY(Types.BYTE));
    }
}
