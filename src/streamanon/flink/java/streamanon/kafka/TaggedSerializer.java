package streamanon.kafka;

import org.apache.flink.connector.kafka.sink.KafkaRecordSerializationSchema;
import org.apache.flink.types.Row;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.internals.RecordHeaders;

/**
 * {@code Row(topic, partition, tag, value)} (tag and value: bytes) to a record for that topic
 * partition with the header {@code NAME: tag} (streamanon's {@code streamanon-in: PARTITION@OFFSET}: the input
 * record the message stands for), no key.
 */
public class TaggedSerializer implements KafkaRecordSerializationSchema<Row> {
    private static final long serialVersionUID = 1L;
    private final String header;

    public TaggedSerializer(String header) {
        this.header = header;
    }

    @Override
    public ProducerRecord<byte[], byte[]> serialize(Row row, KafkaSinkContext context, Long timestamp) {
        RecordHeaders headers = new RecordHeaders();
        headers.add(header, (byte[]) row.getField(2));
        return new ProducerRecord<>((String) row.getField(0), (Integer) row.getField(1), null,
                null, (byte[]) row.getField(3), headers);
    }
}
