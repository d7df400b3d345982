package streamanon.kafka;

import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.types.Row;

/** The partition of a {@code Row(key, Row(partition, offset, value, timestamp))} (TaggedRecords). */
public class ByPartition implements KeySelector<Row, Integer> {
    private static final long serialVersionUID = 1L;

    @Override
    public Integer getKey(Row tagged) {
        return (Integer) ((Row) tagged.getField(1)).getField(0);
    }
}
