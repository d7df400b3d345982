package streamanon.kafka;

import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.typeutils.ResultTypeQueryable;
import org.apache.flink.types.Row;

/**
 * A text as {@code Row(0, text)}: keyed by field 0 in the JVM (PyFlink's keyed functions take
 * {@code Row(key, value)}), without a Python step that computes a constant key.
 */
public class KeyedByZero implements MapFunction<String, Row>, ResultTypeQueryable<Row> {
    private static final long serialVersionUID = 1L;

    @Override
    public Row map(String text) {
        return Row.of(0, text);
    }

    @Override
    public TypeInformation<Row> getProducedType() {
        return Types.ROW(Types.INT, Types.STRING);
    }
}
