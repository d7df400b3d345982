package streamanon.kafka;

import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.connector.kafka.source.reader.deserializer.KafkaRecordDeserializationSchema;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;
import org.apache.kafka.clients.consumer.ConsumerRecord;

/**
 * A Kafka record as {@code Row(0, Row(partition, offset, value, timestamp))}: the constant key 0
 * in field 0 lets Flink key the stream in the JVM (streamanon's reading step is one keyed task),
 * the partition and offset name the record in rejections and in the output's tags, and the
 * record's Kafka timestamp (ms) is the key by which the reading step merges the partitions. A
 * null value (a tombstone) arrives as an empty array: the readers' rules reject it as an empty
 * message.
 */
public class TaggedRecords implements KafkaRecordDeserializationSchema<Row> {
    private static final long serialVersionUID = 1L;
    private static final byte[] EMPTY = new byte[0];

    @Override
    public void deserialize(ConsumerRecord<byte[], byte[]> record, Collector<Row> out) {
        byte[] value = record.value();
        out.collect(Row.of(0, Row.of(record.partition(), record.offset(),
                value == null ? EMPTY : value, record.timestamp())));
    }

    @Override
    public TypeInformation<Row> getProducedType() {
        return Types.ROW(Types.INT, Types.ROW(Types.INT, Types.LONG,
                Types.PRIMITIVE_ARRAY(Types.BYTE), Types.LONG));
    }
}
